// What the console shows, read from the sources the CLI and the metrics use: the tasks table
// (states, solve times, provider calls), the workers_<region> heartbeats (the `workers` command),
// provider_slot_blocks (the fleet-wide thread plan), DLQ_<region> and failed rows, snapshots' manifests
// and audit_log's drills (`snapshots`, `audit`), `assess` itself, and the region lease and
// mirrors (`assess` with several regions). Tokens and keys are never read out of a row.
import { createHash } from "node:crypto";
import { DeliverPolicy, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { type Heartbeat, liveWorkers } from "@pipeline/shared/kv";
import { Rollout } from "@pipeline/shared/rollout";
import { describeIssues, TERMINAL_STATES, taskEventOf } from "@pipeline/shared/schemas";
import { readAssignment, shareOf } from "@pipeline/shared/shards";
import { isFinalEventKind, streams } from "@pipeline/shared/subjects";
import type postgres from "postgres";
import type { Assessment } from "../assess/assess.ts";
import type { RegionsProbe } from "../assess/regions.ts";
import { readAccountFigures, readSpend, type Spend } from "../money/figures.ts";
import { balanceVerdict, type Forecast, forecastBalance } from "../money/forecast.ts";
import { listSnapshots } from "../snapshot/manifest.ts";
import { type Bucket, fillBuckets } from "./charts.ts";

export const WINDOW_MINUTES = 15;

export interface ConsoleState {
  at: string;
  region: string;
  regions: string[];
  /** Rows of the tasks table by (region, state, type). */
  tasks: Array<{ region: string; state: string; type: string; n: number }>;
  window: {
    minutes: number;
    buckets: Bucket[];
    completed: number;
    perMinute: number;
    p50: number | null;
    p95: number | null;
  };
  provider: { solved: number; calls: number; callsPerSolved: number | null; extraPaid: number };
  fleet: { workers: Array<Heartbeat & { waiting: number; heartbeatAgeMs: number }>; error: string | null };
  keys: Array<{ keyRef: string; names: string[]; threads: number; inUse: number; balance: string | null }>;
  dlq: {
    stream: number | null;
    failed: Array<{
      id: string;
      type: string;
      region: string;
      at: string;
      code: string | null;
      reason: string | null;
      redrives: number;
      home: boolean;
    }>;
  };
  recovery: {
    snapshot: { name: string; at: string; ageSec: number } | null;
    drills: Array<{ scenario: string; at: string; rpo: unknown; rtoMs: unknown; passed: unknown; actor: string }>;
    assess: { at: string; level: string; checks: Array<{ name: string; level: string; summary: string }> } | null;
  };
  regionsView: {
    lease: { holder: string; epoch: number; validForMs: number } | null | string;
    mirrors: Array<{ remote: string; lag?: number; activeMs?: number | null; error?: string }>;
  } | null;
  /** The shard assignment of issue 15 (`rollout_<region>`): shards per solver version; null before the first solver wrote it. */
  rollouts:
    | { shards: number; share: Record<string, number>; updatedAt: string; by: string; revision: number }
    | null
    | { error: string };
  /** The rollout service's record (`rollout_control`, key `current`): null when there has been none. */
  rollout?: RolloutView | null | { error: string };
  /** The operator's money: spend from the ledger, each account's balance and hours left (docs/money.md). */
  money: MoneyView | { error: string };
}

export interface MoneyView {
  today: Spend;
  last30Days: Spend;
  accounts: Forecast[];
  /** The `balance` verdict of assess over the accounts. */
  level: "ok" | "warn" | "fail";
}

/** The rollout service's record as stored (@pipeline/shared/rollout: the schema the service and its CLI use) and its KV revision. */
export interface RolloutView {
  record: Rollout;
  revision: number;
}

export interface DataDeps {
  region: string;
  regions: string[];
  sql: postgres.Sql;
  jsm: JetStreamManager;
  js: JetStreamClient;
  workersKv: KV;
  snapshotDir: string;
  /** PROVIDER_KEY, only to match its balance to its hash reference; never shown. */
  providerKey: string | undefined;
  /** The latest cached `assess` (re-run in the background; it probes the provider). */
  assessment: () => Assessment | null;
  regionsProbe: () => RegionsProbe | null;
  /** The region's rollout bucket, when it exists (never created from here). */
  rolloutKv?: () => Promise<KV | undefined>;
  /** The rollout service's bucket (`rollout_control`), when it exists here. */
  rolloutControlKv?: () => Promise<KV | undefined>;
  /** BALANCE_HOURS_WARN: an account lasting fewer hours is a warning. */
  balanceWarnHours?: number;
}

/** The solver's hash reference of a key (apps/solver/src/domain/key-ref.ts). */
export const keyRefOf = (key: string) => `key_${createHash("sha256").update(key).digest("hex").slice(0, 12)}`;

const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));

/** The live solvers, each with its tasks waiting on the provider and its heartbeat's age. */
async function fleetOf(
  d: DataDeps,
  waiting: Array<{ owner: string; n: number }>,
  now: number,
): Promise<ConsoleState["fleet"]> {
  const fleet: ConsoleState["fleet"] = { workers: [], error: null };
  try {
    const waitingBy = new Map(waiting.map((w) => [w.owner, w.n]));
    fleet.workers = (await liveWorkers(d.workersKv, now)).workers.map((w) => ({
      ...w,
      waiting: waitingBy.get(w.workerId) ?? 0,
      heartbeatAgeMs: Math.max(0, now - Date.parse(w.at)),
    }));
  } catch (err) {
    fleet.error = (err as Error).message;
  }
  return fleet;
}

/** Messages in the DLQ stream; null when it cannot be read. */
async function dlqMessages(d: DataDeps): Promise<number | null> {
  try {
    return (await d.jsm.streams.info(streams.dlq(d.region))).state.messages;
  } catch {
    return null;
  }
}

/** The rollout's shard assignment, when the bucket exists. */
async function readRollouts(d: DataDeps): Promise<ConsoleState["rollouts"]> {
  try {
    const kv = await d.rolloutKv?.();
    const a = kv ? await readAssignment(kv) : undefined;
    if (a)
      return {
        shards: a.assignment.owners.length,
        share: shareOf(a.assignment),
        updatedAt: a.assignment.updatedAt,
        by: a.assignment.by,
        revision: a.revision,
      };
    return null;
  } catch (err) {
    // No bucket yet (no solver of this version line ran here): nothing to show, not an error.
    return /not found/i.test((err as Error).message) ? null : { error: (err as Error).message };
  }
}

/** The rollout service's record (`rollout_control`, key `current`), when there is one. */
async function readRollout(d: DataDeps): Promise<ConsoleState["rollout"]> {
  try {
    const e = await (await d.rolloutControlKv?.())?.get("current");
    if (e?.operation !== "PUT") return null;
    const r = Rollout.safeParse(e.json());
    return r.success
      ? { record: r.data, revision: e.revision }
      : { error: `record does not parse: ${describeIssues(r.error)}` };
  } catch (err) {
    // No `rollout_control` stream: no rollout was ever started here; there is none to show, not an error.
    return /not found/i.test((err as Error).message) ? null : { error: (err as Error).message };
  }
}

/** Rows of the tasks table by (region, state, type). */
function readTaskCounts(sql: postgres.Sql): Promise<ConsoleState["tasks"]> {
  return sql<
    { region: string; state: string; type: string; n: number }[]
  >`select region, state, type, count(*)::int as n from tasks group by 1, 2, 3 order by 1, 2, 3`;
}

/** Tasks finished in the last WINDOW_MINUTES minutes: per minute, and in all, with solve time percentiles. */
async function readWindow(sql: postgres.Sql, now: number): Promise<ConsoleState["window"]> {
  const since = Math.floor(now / 60_000 - (WINDOW_MINUTES - 1)) * 60;
  const [buckets, totals] = await Promise.all([
    sql<{ minute: number; n: number; p50: number | null; p95: number | null }[]>`
      select floor(extract(epoch from completed_at) / 60)::bigint::int as minute, count(*)::int as n,
             percentile_cont(0.5) within group (order by extract(epoch from completed_at - created_at) * 1000) as p50,
             percentile_cont(0.95) within group (order by extract(epoch from completed_at - created_at) * 1000) as p95
      from tasks where state in ('completed', 'expired') and completed_at >= to_timestamp(${since})
      group by 1`,
    sql<{ n: number; p50: number | null; p95: number | null }[]>`
      select count(*)::int as n,
             percentile_cont(0.5) within group (order by extract(epoch from completed_at - created_at) * 1000) as p50,
             percentile_cont(0.95) within group (order by extract(epoch from completed_at - created_at) * 1000) as p95
      from tasks where state in ('completed', 'expired') and completed_at >= to_timestamp(${since})`,
  ]);
  const t = totals[0]!;
  return {
    minutes: WINDOW_MINUTES,
    buckets: fillBuckets(buckets, now, WINDOW_MINUTES),
    completed: t.n,
    perMinute: t.n / WINDOW_MINUTES,
    p50: num(t.p50),
    p95: num(t.p95),
  };
}

/** Provider calls of the solved tasks, and the extra submissions paid for. */
async function readProviderFigures(sql: postgres.Sql): Promise<ConsoleState["provider"]> {
  const [p] = await sql<{ solved: number; calls: number; extra: number }[]>`
      select count(*)::int as solved, coalesce(sum(provider_submissions + provider_polls), 0)::int as calls,
             coalesce(sum(greatest(provider_submissions - 1, 0)), 0)::int as extra
      from tasks where state in ('completed', 'expired')`;
  return {
    solved: p!.solved,
    calls: p!.calls,
    callsPerSolved: p!.solved ? p!.calls / p!.solved : null,
    extraPaid: p!.extra,
  };
}

/** Tasks waiting on the provider, by the solver that holds them. */
function readWaiting(sql: postgres.Sql) {
  return sql<
    { owner: string; n: number }[]
  >`select lease_owner as owner, count(*)::int as n from tasks where state = 'solving' and provider_id is not null and lease_owner is not null group by 1`;
}

/**
 * The plan per key as the live solvers lease it (provider_slot_blocks), and its provider tasks
 * in flight (what the plan counts: a provider id, solving or retrying).
 */
function readSlots(sql: postgres.Sql) {
  return sql<{ key_ref: string; threads: number; in_use: number }[]>`
      select b.key_ref, max(b.threads)::int as threads,
             (select count(*)::int from tasks t where t.provider_key_ref = b.key_ref and t.provider_id is not null and t.state in ('solving', 'retrying')) as in_use
      from provider_slot_blocks b where b.lease_until > now() group by b.key_ref order by 1`;
}

/** The 50 latest failed tasks, `home` when this region took them. */
async function readFailed(sql: postgres.Sql, region: string): Promise<ConsoleState["dlq"]["failed"]> {
  const failed = await sql<
    {
      id: string;
      type: string;
      region: string;
      at: Date;
      code: string | null;
      reason: string | null;
      redrives: number;
    }[]
  >`
      select id, type, region, coalesce(completed_at, updated_at) as at, error_code as code, error_message as reason, redrives
      from tasks where state = 'failed' order by coalesce(completed_at, updated_at) desc limit 50`;
  return failed.map((f) => ({ ...f, at: new Date(f.at).toISOString(), home: f.region === region }));
}

/** The latest drill of each scenario (audit_log). */
async function readDrills(sql: postgres.Sql): Promise<ConsoleState["recovery"]["drills"]> {
  const drills = await sql<{ at: Date; actor: string; detail: Record<string, unknown> }[]>`
      select distinct on (detail->>'scenario') at, actor, detail from audit_log where action = 'drill' order by detail->>'scenario', id desc`;
  return drills.map((r) => ({
    scenario: String(r.detail.scenario),
    at: new Date(r.at).toISOString(),
    rpo: r.detail.rpo,
    rtoMs: r.detail.rtoMs,
    passed: r.detail.passed,
    actor: r.actor,
  }));
}

/** Each provider key the plan or a live solver names: its threads, those in use, and (for PROVIDER_KEY) its balance. */
function keysOf(
  slots: Array<{ key_ref: string; threads: number; in_use: number }>,
  fleet: ConsoleState["fleet"],
  ourRef: string | undefined,
  balance: string | null,
): ConsoleState["keys"] {
  const namesOf = (ref: string) => [...new Set(fleet.workers.filter((w) => w.keyRef === ref).map((w) => w.keyName))];
  const refs = new Set([...slots.map((s) => s.key_ref), ...fleet.workers.map((w) => w.keyRef)]);
  return [...refs].sort().map((ref) => {
    const s = slots.find((x) => x.key_ref === ref);
    return {
      keyRef: ref,
      names: namesOf(ref),
      threads: s?.threads ?? 0,
      inUse: s?.in_use ?? 0,
      balance: ref === ourRef ? balance : null,
    };
  });
}

/** Spend today and over 30 days, each account's forecast and their verdict; an unreadable ledger is shown as such. */
async function readMoney(sql: postgres.Sql, warnHours: number, now: number): Promise<ConsoleState["money"]> {
  try {
    const [spend, figures] = await Promise.all([readSpend(sql), readAccountFigures(sql)]);
    const accounts = figures.map(forecastBalance);
    const { level } = balanceVerdict(accounts, { warnHours, staleMs: 15 * 60_000 }, now);
    return { ...spend, accounts, level };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

/** The newest snapshot, the drills and the cached `assess`. */
function recoveryOf(
  d: DataDeps,
  drills: ConsoleState["recovery"]["drills"],
  a: Assessment | null,
  now: number,
): ConsoleState["recovery"] {
  const newest = listSnapshots(d.snapshotDir)[0];
  return {
    snapshot: newest
      ? {
          name: newest.manifest.name,
          at: newest.manifest.createdAt,
          ageSec: Math.round((now - Date.parse(newest.manifest.createdAt)) / 1000),
        }
      : null,
    drills,
    assess: a
      ? {
          at: a.at,
          level: a.level,
          checks: a.checks.map((c) => ({ name: c.name, level: c.level, summary: c.summary })),
        }
      : null,
  };
}

export async function collectState(d: DataDeps, now = Date.now()): Promise<ConsoleState> {
  const sql = d.sql;
  const [tasks, window, provider, waiting, slots, failed, drills, money] = await Promise.all([
    readTaskCounts(sql),
    readWindow(sql, now),
    readProviderFigures(sql),
    readWaiting(sql),
    readSlots(sql),
    readFailed(sql, d.region),
    readDrills(sql),
    readMoney(sql, d.balanceWarnHours ?? 6, now),
  ]);
  const fleet = await fleetOf(d, waiting, now);
  const a = d.assessment();
  const keys = keysOf(slots, fleet, d.providerKey ? keyRefOf(d.providerKey) : undefined, a?.provider?.balance ?? null);
  const dlqStream = await dlqMessages(d);
  const rollouts = await readRollouts(d);
  const rollout = await readRollout(d);
  const recovery = recoveryOf(d, drills, a, now);
  const probe = d.regionsProbe();
  return {
    at: new Date(now).toISOString(),
    region: d.region,
    regions: d.regions,
    tasks,
    window,
    provider,
    fleet,
    keys,
    dlq: { stream: dlqStream, failed },
    recovery,
    regionsView: regionsViewOf(d.regions, probe),
    rollouts,
    rollout,
    money,
  };
}

/** With several regions: the lease this region sees and each mirror's lag (what `assess` probes). */
export function regionsViewOf(regions: string[], probe: RegionsProbe | null): ConsoleState["regionsView"] {
  if (regions.length < 2 || !probe) return null;
  return {
    lease:
      probe.lease instanceof Error
        ? probe.lease.message
        : probe.lease
          ? { holder: probe.lease.holder, epoch: probe.lease.epoch, validForMs: probe.lease.validUntil - probe.now }
          : null,
    mirrors: probe.mirrors.map((m) =>
      "error" in m ? { remote: m.remote, error: m.error } : { remote: m.remote, lag: m.lag, activeMs: m.activeMs },
    ),
  };
}

/** Event fields a timeline may show; anything else (the token, the user agent) is never sent to a page. */
const SHOWN = [
  "worker",
  "attempt",
  "providerId",
  "keyRef",
  "code",
  "deadLetter",
  "delayMs",
  "redrives",
  "deadlineAt",
  "from",
  "epoch",
  "expiresAt",
  "completedAt",
  "by",
] as const;

export function safeEventData(data: Record<string, unknown> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of SHOWN) if (data && data[k] !== undefined && data[k] !== null) out[k] = data[k];
  return out;
}

export interface Timeline {
  task: {
    id: string;
    region: string;
    type: string;
    priority: string;
    state: string;
    version: number;
    attempts: number;
    redrives: number;
    providerId: string | null;
    providerKeyRef: string | null;
    providerSubmissions: number;
    providerPolls: number;
    leaseOwner: string | null;
    submitOwner: string | null;
    errorCode: string | null;
    errorMessage: string | null;
    createdAt: string;
    startedAt: string | null;
    completedAt: string | null;
    deadlineAt: string | null;
    hasToken: boolean;
  };
  events: Array<{
    seq: number;
    at: string;
    kind: string;
    state: string;
    version: number;
    region: string;
    data: Record<string, unknown>;
  }>;
  /** Events were read from the task's acceptance on; true when the read stopped at its limit (the next read goes on from there) or failed. */
  truncated: boolean;
  audit: Array<{ at: string; actor: string; action: string; detail: unknown }>;
}

const iso = (d: Date | string | null) => (d === null ? null : new Date(d).toISOString());

/**
 * Where one reader's scan of a task's events stopped, and what it found (issue 34: EVENTS
 * subjects do not carry the task id, so a timeline scans; each refresh reads only what is new).
 */
export interface EventsCursor {
  /** The next EVENTS sequence to read; 0 before the first read (which starts at the task's acceptance). */
  nextSeq: number;
  events: Timeline["events"];
  /** The row version at which nothing more can come: the task was final and its final event (or a quiet minute after it) read. */
  doneAtVersion?: number;
}

/** A new cursor: the first read scans from the task's acceptance. */
export const newEventsCursor = (): EventsCursor => ({ nextSeq: 0, events: [] });

/** After this long past completion with nothing new, a final task's event may be taken as read (the publish retry is far shorter). */
const SETTLED_MS = 60_000;

async function taskRow(sql: postgres.Sql, id: string): Promise<Timeline["task"] | undefined> {
  const [row] = await sql<Record<string, unknown>[]>`
    select id, region, type, priority, state, version, attempts, redrives, provider_id, provider_key_ref, provider_submissions, provider_polls,
           lease_owner, submit_owner, error_code, error_message, created_at, started_at, completed_at, deadline_at, token is not null as has_token
    from tasks where id = ${id}`;
  if (!row) return undefined;
  return {
    id: String(row.id),
    region: String(row.region),
    type: String(row.type),
    priority: String(row.priority),
    state: String(row.state),
    version: Number(row.version),
    attempts: Number(row.attempts),
    redrives: Number(row.redrives),
    providerId: (row.provider_id as string | null) ?? null,
    providerKeyRef: (row.provider_key_ref as string | null) ?? null,
    providerSubmissions: Number(row.provider_submissions),
    providerPolls: Number(row.provider_polls),
    leaseOwner: (row.lease_owner as string | null) ?? null,
    submitOwner: (row.submit_owner as string | null) ?? null,
    errorCode: (row.error_code as string | null) ?? null,
    errorMessage: (row.error_message as string | null) ?? null,
    createdAt: iso(row.created_at as Date)!,
    startedAt: iso(row.started_at as Date | null),
    completedAt: iso(row.completed_at as Date | null),
    deadlineAt: iso(row.deadline_at as Date | null),
    hasToken: Boolean(row.has_token),
  };
}

export interface TimelineDeps {
  sql: postgres.Sql;
  js: JetStreamClient;
  jsm: JetStreamManager;
}

/**
 * Reads the task's events past `cursor.nextSeq` into the cursor (at most `maxScan` messages);
 * true when it read to the end of the stream. No consumer is created when the stream holds
 * nothing past the cursor.
 */
async function readNewEvents(
  d: TimelineDeps,
  task: Timeline["task"],
  cursor: EventsCursor,
  maxScan: number,
): Promise<boolean> {
  const stream = streams.events(task.region);
  const lastSeq = (await d.jsm.streams.info(stream)).state.last_seq;
  if (cursor.nextSeq > lastSeq) return true;
  const from = new Date(Date.parse(task.createdAt) - 5000).toISOString();
  const start =
    cursor.nextSeq > 0
      ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: cursor.nextSeq }
      : { deliver_policy: DeliverPolicy.StartTime, opt_start_time: from };
  const consumer = await d.js.consumers.get(stream, start);
  let scanned = 0;
  let atEnd = false;
  try {
    while (!atEnd && scanned < maxScan) {
      const batch = await consumer.fetch({ max_messages: Math.min(1000, maxScan - scanned), expires: 1000 });
      let got = 0;
      for await (const m of batch) {
        got++;
        scanned++;
        cursor.nextSeq = m.seq + 1;
        const ev = taskEventOf(m);
        if (ev?.taskId === task.id)
          cursor.events.push({
            seq: m.seq,
            at: ev.at,
            kind: ev.kind,
            state: ev.state,
            version: ev.version,
            region: ev.region,
            data: safeEventData(ev.data),
          });
        if (m.info.pending === 0) atEnd = true;
        if (atEnd || scanned >= maxScan) break;
      }
      if (got === 0) atEnd = true;
    }
  } finally {
    await consumer.delete().catch(() => {});
  }
  // Read to the end: what was there when the read began is behind the cursor now.
  if (atEnd) cursor.nextSeq = Math.max(cursor.nextSeq, lastSeq + 1);
  return atEnd;
}

/** Whether nothing more can come for the task at this version: final, and its final event read (or completed long enough ago). */
function settled(task: Timeline["task"], cursor: EventsCursor, readToEnd: boolean, now: number): boolean {
  if (!(TERMINAL_STATES as readonly string[]).includes(task.state)) return false;
  if (cursor.events.some((e) => e.version >= task.version && isFinalEventKind(e.kind))) return true;
  return readToEnd && task.completedAt !== null && now - Date.parse(task.completedAt) > SETTLED_MS;
}

/**
 * A task by id: its row (no token), its events in its home's EVENTS stream, and the audit entries
 * that name it (console redrives). The events come from `cursor` (pass the same one again to read
 * only what the stream gained since): a read scans from where the last stopped, at most `maxScan`
 * messages, creates no consumer when the stream gained nothing, and none at all once the task is
 * settled at its row's version.
 */
export async function taskTimeline(
  d: TimelineDeps,
  id: string,
  cursor: EventsCursor = newEventsCursor(),
  maxScan = 50_000,
): Promise<Timeline | undefined> {
  const task = await taskRow(d.sql, id);
  if (!task) return undefined;
  let truncated = false;
  if (cursor.doneAtVersion !== task.version) {
    try {
      const readToEnd = await readNewEvents(d, task, cursor, maxScan);
      truncated = !readToEnd;
      if (settled(task, cursor, readToEnd, Date.now())) cursor.doneAtVersion = task.version;
    } catch {
      truncated = true;
    }
  }
  const audit = await d.sql<{ at: Date; actor: string; action: string; detail: unknown }[]>`
    select at, actor, action, detail from audit_log where detail->>'taskId' = ${id} order by id`;
  return { task, events: [...cursor.events], truncated, audit: audit.map((a) => ({ ...a, at: iso(a.at)! })) };
}
