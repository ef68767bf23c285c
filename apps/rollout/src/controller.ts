// The rollout service's one job, a tick at a time: read the record; if its decision is not applied
// yet, move every region's shards to what it says (idempotent, so a service killed -9 halfway just
// does it again); otherwise measure the current step's gate window, `decide`, store the decision
// (compare-and-set, with its figures in the record's log), then apply it. Operators' commands are
// writes to the same record (cli/commands/); the next tick carries them out.
import type { Logger } from "@pipeline/shared/log";
import { NOTIFIED_KEEP } from "@pipeline/shared/rollout";
import { audit, type RegionLink } from "./adapters/regions.ts";
import { shiftTo } from "./adapters/shift.ts";
import type { RolloutStore, Stored } from "./adapters/store.ts";
import { ProcessWindow, type TaskFigures, taskFigures } from "./domain/figures.ts";
import { type Notice, noticeOf } from "./domain/notice.ts";
import { moveFor, placement } from "./domain/placement.ts";
import {
  type Action,
  decide,
  desiredPercent,
  type GateVerdict,
  gateVerdict,
  percentAt,
  type Rollout,
  type VersionFigures,
  withLog,
} from "./domain/plan.ts";

export interface ControllerDeps {
  store: RolloutStore;
  /** Every region the service can reach, by name; the home region's database takes the audit log. */
  regions: Map<string, RegionLink>;
  home: RegionLink;
  ackWaitMs: number;
  now: () => number;
  log: Logger;
  /** Told of every verdict (metrics). */
  onVerdict?: (region: string, verdict: GateVerdict) => void;
  /**
   * Told once when the record enters a state a person should hear of (rolled back, waiting for
   * promotion, inconclusive, promoted, aborted); `key` is unique per event. Its key is kept in the
   * record (`notified`), so a restarted service does not tell it again.
   */
  notify?: (n: Notice) => void;
}

export interface GateReading {
  region: string;
  at: string;
  verdict: GateVerdict;
  canary: VersionFigures;
  stable: VersionFigures;
}

export interface RolloutStatus {
  record?: Rollout | undefined;
  revision?: number | undefined;
  /** What the service is waiting for, or the last thing it did. */
  note: string;
  gate?: GateReading | undefined;
  regions: Record<
    string,
    { share: Record<string, number>; processes: Record<string, number>; reachable: boolean; error?: string }
  >;
}

const EMPTY: TaskFigures = { tasks: 0, failed: 0, extraPaid: 0, p95Ms: null };

/** A step's process window, kept from tick to tick while the step lasts. */
type StepWindow = { key: string; procs: ProcessWindow } | undefined;

/** The link to region `name`, or an error naming the settings that give one. */
function linkOf(d: ControllerDeps, name: string): RegionLink {
  const l = d.regions.get(name);
  if (!l)
    throw new Error(
      `region ${name} is in the plan but the rollout service has no connection to it (REGIONS, NATS_URL_<REGION>)`,
    );
  return l;
}

/** Shares and live processes per version in every region (the registry the status shows). */
async function survey(d: ControllerDeps): Promise<RolloutStatus["regions"]> {
  const out: RolloutStatus["regions"] = {};
  for (const [name, l] of d.regions) {
    try {
      const a = await l.assignment();
      const share: Record<string, number> = {};
      for (const v of a?.owners ?? []) share[v] = (share[v] ?? 0) + 1;
      const processes: Record<string, number> = {};
      for (const b of (await l.heartbeats([])).beats) processes[b.version] = (processes[b.version] ?? 0) + 1;
      out[name] = { share, processes, reachable: true };
    } catch (err) {
      out[name] = { share: {}, processes: {}, reachable: false, error: (err as Error).message };
    }
  }
  return out;
}

/** Writes `action` to the home region's audit log and publishes it in every region of the plan (best effort). */
async function record(
  d: ControllerDeps,
  action: string,
  r: Rollout,
  detail: { region?: string; percent?: number; why: string; figures?: Record<string, unknown> },
) {
  const data = { id: r.id, version: r.plan.version, stable: r.plan.stable, state: r.state, action, ...detail };
  await audit(d.home.db, r.by && action === "start" ? r.by : "rollout-service", `rollout.${action}`, data).catch(
    (err: Error) => d.log.warn({ err: err.message }, "audit entry not written"),
  );
  for (const name of r.plan.regions) {
    const l = d.regions.get(name);
    await l
      ?.publish(data, `${r.id}:${r.log.length}:${action}`)
      .catch((err: Error) => d.log.warn({ region: name, err: err.message }, "rollout event not published"));
  }
}

/** Gives `r`'s canary `percent` % of region `name`'s shards (at 0 %, every shard back to the stable version); what moved, for the log. */
async function shiftRegion(d: ControllerDeps, r: Rollout, name: string, percent: number): Promise<string | undefined> {
  const l = linkOf(d, name);
  const a = await l.assignment();
  if (!a) throw new Error(`region ${name} has no shard assignment yet (no solver has started there)`);
  const { to, count } = moveFor(r.plan, percent, a.owners.length);
  const res = await shiftTo({
    jsm: l.jsm,
    kv: l.shards,
    region: name,
    to,
    count,
    by: `rollout ${r.id}`,
    ackWaitMs: d.ackWaitMs,
    versions: [r.plan.version, r.plan.stable],
  });
  return res.moved.length
    ? `${name}: ${res.moved.length} shard(s) to ${to} (${Object.entries(res.share)
        .map(([v, n]) => `${v} ${n}`)
        .join(", ")})`
    : undefined;
}

/** Moves every region of `r`'s plan to its share; what moved, for the log. */
async function shiftRegions(d: ControllerDeps, r: Rollout): Promise<string[]> {
  const moved: string[] = [];
  for (const [i, name] of r.plan.regions.entries()) {
    const m = await shiftRegion(d, r, name, desiredPercent(r, i));
    if (m) moved.push(m);
  }
  return moved;
}

/** The current step's gate: canary against stable in the current region, since the step began (`procs`: the step's window). */
async function measure(d: ControllerDeps, r: Rollout, procs: ProcessWindow): Promise<GateReading> {
  const name = r.plan.regions[r.region]!;
  const l = linkOf(d, name);
  const hb = await l.heartbeats(procs.knownWorkers());
  procs.observe(hb.beats, hb.deleted);
  const a = await l.assignment();
  if (!a) throw new Error(`region ${name} has no shard assignment`);
  const now = d.now();
  const byVersion = taskFigures(await l.windowRows(r.stepStartedAt), a.owners, now);
  const figures = (v: string): VersionFigures => ({ ...(byVersion.get(v) ?? EMPTY), ...procs.figures(v) });
  const canary = figures(r.plan.version);
  const stable = figures(r.plan.stable);
  const processes = procs.processes();
  const verdict: GateVerdict =
    (processes[r.plan.version] ?? 0) === 0 && canary.lostProcesses === 0
      ? { pass: "wait", why: `no ${r.plan.version} process in ${name}` }
      : gateVerdict(canary, stable, r.plan.gate);
  return { region: name, at: new Date(now).toISOString(), verdict, canary, stable };
}

/** What the status says of a decision: the step and why it waits, or what was decided. */
function decisionNote(r: Rollout, gate: GateReading, action: Action): string {
  return action.kind === "wait"
    ? `step ${percentAt(r.plan.steps, r.step)}% in ${gate.region}: ${gate.verdict.pass === true ? "baking" : action.why}`
    : action.kind;
}

/**
 * Stores a decision (compare-and-set on `revision`, its figures in the record's log) and records
 * it; the stored record, or undefined when an operator's command came first.
 */
async function storeDecision(
  d: ControllerDeps,
  { record: r, revision }: Stored,
  action: Exclude<Action, { kind: "wait" }>,
  gate: GateReading,
): Promise<Stored | undefined> {
  const why = action.kind === "shift" || action.kind === "done" ? gate.verdict.why : action.next.reason!;
  const entry = {
    action: action.kind,
    region: action.kind === "done" ? undefined : action.region,
    percent: action.kind === "shift" || action.kind === "await" ? action.percent : undefined,
    why,
    figures: { canary: gate.canary, stable: gate.stable },
  };
  const next = withLog(
    action.next,
    Object.fromEntries(Object.entries(entry).filter(([, v]) => v !== undefined)) as typeof entry,
    new Date(d.now()),
  );
  const rev = await d.store.write(next, revision);
  if (rev === undefined) return undefined; // an operator's command came first: the next tick reads it
  d.log.info({ id: r.id, action: action.kind, region: entry.region, percent: entry.percent, why }, "rollout decision");
  await record(d, action.kind, next, {
    ...(entry.region ? { region: entry.region } : {}),
    ...(entry.percent ? { percent: entry.percent } : {}),
    why,
    figures: entry.figures,
  });
  return { record: next, revision: rev };
}

/**
 * Hands the notification `cur`'s state calls for to `d.notify` once: not when its key is in the
 * record's `notified` list or was handed on by this process; the key is then written into the
 * record (compare-and-set; a lost race is retried on the next tick, the in-process set keeps it
 * from being told twice). A record written before `notified` existed that has ended is adopted
 * silently (its end was before this hook). The record as stored now.
 */
async function announce(d: ControllerDeps, told: Set<string>, cur: Stored): Promise<Stored> {
  const n = d.notify && noticeOf(cur.record);
  const r = cur.record;
  if (!n || r.notified?.includes(n.key)) return cur;
  const adopt =
    r.notified === undefined && (r.state === "promoted" || r.state === "rolledBack" || r.state === "aborted");
  if (!adopt && !told.has(n.key)) {
    told.add(n.key);
    try {
      d.notify!(n);
    } catch (err) {
      d.log.warn({ id: r.id, kind: n.kind, err: (err as Error).message }, "rollout notification failed");
    }
  }
  const next = { ...r, notified: [...(r.notified ?? []), n.key].slice(-NOTIFIED_KEEP) };
  const revision = await d.store.write(next, cur.revision);
  return revision === undefined ? cur : { record: next, revision };
}

export function createController(d: ControllerDeps) {
  let window: StepWindow;
  const told = new Set<string>();
  let status: RolloutStatus = { note: "starting", regions: {} };

  /** The process window of `r`'s current step (a new one when the step changed). */
  const stepWindow = (r: Rollout): ProcessWindow => {
    const key = `${r.id}/${r.region}/${r.step}/${r.stepStartedAt}`;
    if (window?.key !== key) window = { key, procs: new ProcessWindow(r.stepStartedAt) };
    return window.procs;
  };

  /**
   * One step of carrying out a stored record: wait (no canary process where it is to get shards),
   * roll back (none past the deadline: the rolled back record is stored and returned, to be
   * carried out next), or move every region's shards and mark the record applied.
   */
  async function applyStep({ record: r, revision }: Stored): Promise<Stored | undefined> {
    const regions = await survey(d);
    status = { ...status, regions };
    const p = placement(r, (name) => regions[name]?.processes[r.plan.version] ?? 0, d.now());
    if (p.kind === "wait") {
      status = { ...status, note: `waiting: ${p.why}` };
      return undefined;
    }
    if (p.kind === "rollback") {
      const rev = await d.store.write(p.next, revision);
      if (rev === undefined) return undefined; // changed meanwhile: the next tick sees it
      await record(d, "rollback", p.next, { region: p.region, why: p.why });
      return { record: p.next, revision: rev };
    }
    const moved = await shiftRegions(d, r);
    const live = r.state === "running" || r.state === "paused";
    const next = withLog(
      { ...r, applied: true, stepStartedAt: live ? d.now() : r.stepStartedAt },
      { action: "applied", why: moved.length ? moved.join("; ") : "shards already in place" },
      new Date(d.now()),
    );
    if ((await d.store.write(next, revision)) === undefined) return undefined; // changed meanwhile: the next tick sees it
    status = { ...status, record: next, note: `applied: ${next.log.at(-1)!.why}` };
    d.log.info({ id: r.id, state: r.state, moved }, "rollout applied");
    await record(d, "applied", next, { why: next.log.at(-1)!.why });
    return undefined;
  }

  /**
   * Moves every region's shards to what the record says, then marks it applied: step by step until
   * a step has nothing left to carry out. A rollback is a step that stores the rolled back record
   * and hands it on; that record wants 0 % everywhere, so the step after it always moves.
   */
  async function apply(r: Rollout, revision: number): Promise<void> {
    let pending: Stored | undefined = { record: r, revision };
    while (pending) pending = await applyStep(pending);
  }

  async function tick(): Promise<void> {
    const cur = await d.store.read();
    if (!cur) {
      status = { note: "no rollout", regions: await survey(d) };
      return;
    }
    const { record: r, revision } = await announce(d, told, cur);
    status = { ...status, record: r, revision };
    if (!r.applied) return apply(r, revision);
    if (r.state !== "running") {
      status = { ...status, note: `rollout ${r.state}${r.reason ? `: ${r.reason}` : ""}`, regions: await survey(d) };
      return;
    }
    const gate = await measure(d, r, stepWindow(r));
    d.onVerdict?.(gate.region, gate.verdict);
    const action: Action = decide(r, d.now(), gate.verdict);
    status = { ...status, gate, note: decisionNote(r, gate, action) };
    if (action.kind === "wait") return;
    const stored = await storeDecision(d, { record: r, revision }, action, gate);
    // A pause (a pause step, an inconclusive step) moves nothing: the record stays applied.
    if (stored && !stored.record.applied) await apply(stored.record, stored.revision);
  }

  return {
    tick,
    status: (): RolloutStatus => status,
  };
}
export type Controller = ReturnType<typeof createController>;
