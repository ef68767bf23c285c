// The region's lease keeper (in the recovery service): renews `lease.<region>` in the witness's
// KV every renewMs by compare-and-set, tells the region's solvers until when they may submit
// (local KV `region_<r>`, key `lease`), watches the other regions' leases, takes one over when it
// has been still for TTL + margin, and then adopts that region's unfinished tasks. Decisions are
// in @pipeline/shared/regions (lease.ts); this file only reads, writes and times.
import type { KV, KvEntry } from "@nats-io/kv";
import type { Logger } from "@pipeline/shared/log";
import {
  LEASE_RETRY_MS,
  Lease,
  type LeaseTiming,
  type LeaseView,
  type Observed,
  otherLeaseAction,
  ownLeaseAction,
  released,
  validUntil,
} from "@pipeline/shared/regions";
import type { PlanKeeper } from "./plan-keeper.ts";

export interface KeeperDeps {
  /** The witness's `leases` bucket (a quorum a cut-off region cannot reach). */
  witness: KV;
  /** This region's own bucket, read by its solvers. */
  local: KV;
  region: string;
  remotes: string[];
  timing: LeaseTiming;
  renewMs: number;
  /**
   * After a failed round the next one starts this soon (default LEASE_RETRY_MS, at most renewMs).
   * While the witness elects a new leader for the leases stream every write fails at once ("no
   * responders"): a short retry renews within this much of the election, not up to renewMs later.
   */
  retryMs?: number;
  log: Logger;
  /** Runs after a takeover (and again at start if one was not finished): adopts the remote's tasks. */
  adopt(remote: string, epoch: number, phase: "resumable" | "all"): Promise<unknown>;
  /** How long after a takeover the tasks without a known provider id are adopted too. */
  uncertainMs: number;
  /**
   * With it: after each round in which this region holds its lease, its share of every provider
   * account's plan (plan-keeper.ts); a region whose lease was taken over counts until `releaseMs` after.
   */
  plan?: { keeper: PlanKeeper; releaseMs: number };
  /** Monotonic clock for "still for how long" (default performance.now), wall clock for validUntil. */
  monotonic?: () => number;
  wall?: () => number;
  /** Told when this region is fenced (its last lease view lapsed) or serves again, and of each takeover it made. */
  onEvent?: (e: LeaseEvent) => void;
}

/** What the keeper tells the service (notifications, incidents). */
export type LeaseEvent =
  | { kind: "fenced"; region: string; epoch: number; at: number }
  | { kind: "unfenced"; region: string; epoch: number; at: number; fencedForMs: number }
  | { kind: "takeover"; region: string; remote: string; epoch: number; at: number; stillForMs: number };

export interface LeaseKeeper {
  /** The keeper's latest view of every lease it watches (for assess and the console). */
  observed(): Record<string, Observed | undefined>;
  /** One round (renew, watch, take over): exposed for tests. */
  tick(): Promise<void>;
  stop(): Promise<void>;
}

const key = (region: string) => `lease.${region}`;

/** The keeper's state between rounds: its dependencies, clocks, and the latest view of each lease. */
interface Keeper {
  d: KeeperDeps;
  mono: () => number;
  wall: () => number;
  seen: Record<string, Observed | undefined>;
  /** Until when the region's solvers were last told they may submit (0: never), and since when they may not. */
  heldUntil: number;
  fencedAt?: number | undefined;
}

/**
 * After each round: the region is fenced once the last validUntil it published has passed without
 * a renewal (a lease taken over, or a witness out of reach), and serves again at its next renewal.
 */
function fenceWatch(k: Keeper, until: number): void {
  const epoch = k.seen[k.d.region]?.lease?.epoch ?? 0;
  const now = k.wall();
  if (until > 0) {
    if (k.fencedAt !== undefined)
      k.d.onEvent?.({ kind: "unfenced", region: k.d.region, epoch, at: now, fencedForMs: now - k.fencedAt });
    k.heldUntil = until;
    k.fencedAt = undefined;
    return;
  }
  if (k.heldUntil > 0 && now >= k.heldUntil && k.fencedAt === undefined) {
    k.fencedAt = now;
    k.d.onEvent?.({ kind: "fenced", region: k.d.region, epoch, at: now });
  }
}

const parseJson = (e: KvEntry): unknown => {
  try {
    return e.json();
  } catch {
    return undefined;
  }
};

/** Reads a region's lease at the witness; `changedAt` is when its revision was first seen to change. */
async function observe(k: Keeper, region: string): Promise<Observed | undefined> {
  const e: KvEntry | null = await k.d.witness.get(key(region));
  const prev = k.seen[region];
  if (!e || e.operation !== "PUT") {
    k.seen[region] = undefined;
    return undefined;
  }
  const parsed = Lease.safeParse(parseJson(e));
  const o: Observed = {
    lease: parsed.success ? parsed.data : undefined,
    revision: e.revision,
    changedAt: prev && prev.revision === e.revision ? prev.changedAt : k.mono(),
  };
  k.seen[region] = o;
  return o;
}

const publishView = (k: Keeper, view: LeaseView) => k.d.local.put("lease", JSON.stringify(view));

/** Adoption record per remote (local KV `adopted.<remote>`): the epoch, the phase done, when it was taken. */
async function adoptIfOwed(k: Keeper, remote: string, o: Observed | undefined): Promise<void> {
  const { d } = k;
  if (!o?.lease || o.lease.holder !== d.region) return;
  const e = await d.local.get(`adopted.${remote}`);
  let rec: { epoch: number; phase: string; at: number } | undefined;
  try {
    rec = e?.operation === "PUT" ? (e.json() as typeof rec) : undefined;
  } catch {
    rec = undefined;
  }
  if (!rec || rec.epoch < o.lease.epoch) {
    await d.adopt(remote, o.lease.epoch, "resumable");
    await d.local.put(`adopted.${remote}`, JSON.stringify({ epoch: o.lease.epoch, phase: "resumable", at: k.wall() }));
  } else if (rec.phase === "resumable" && k.wall() - rec.at >= d.uncertainMs) {
    await d.adopt(remote, o.lease.epoch, "all");
    await d.local.put(`adopted.${remote}`, JSON.stringify({ ...rec, phase: "all" }));
  }
}

/**
 * This region's lease: wait (publish a lapsed view), or create, renew or reclaim it and publish
 * until when it holds. Returns that time (0: it does not hold its lease).
 */
async function renewOwn(k: Keeper, startedAt: number): Promise<number> {
  const { d } = k;
  const own = await observe(k, d.region);
  const action = ownLeaseAction(d.region, own, k.mono(), d.timing);
  if (action.kind === "wait") {
    await publishView(k, { holder: own?.lease?.holder ?? "?", epoch: own?.lease?.epoch ?? 0, validUntil: 0 });
    return 0;
  }
  const epoch = action.kind === "create" ? 1 : action.epoch;
  const value = JSON.stringify({ holder: d.region, epoch, renewedAt: startedAt } satisfies Lease);
  if (action.kind === "create") await d.witness.create(key(d.region), value);
  else await d.witness.update(key(d.region), value, own!.revision);
  if (action.kind !== "renew") d.log.warn({ region: d.region, epoch, action: action.kind }, "region lease acquired");
  const until = validUntil(startedAt, d.timing);
  await publishView(k, { holder: d.region, epoch, validUntil: until });
  return until;
}

/** The plan's shares, when this region holds its lease (its own errors are logged by the plan keeper). */
async function planRound(k: Keeper, until: number): Promise<void> {
  const p = k.d.plan;
  if (!p || until <= 0) return;
  const now = k.mono();
  await p.keeper
    .round(until, (remote) => released(remote, k.seen[remote], now, p.releaseMs))
    .catch((err: Error) => k.d.log.error({ err: err.message }, "plan share round failed"));
}

/** Every other region's lease: one still past TTL + margin is taken over; then what is owed is adopted. */
async function watchRemotes(k: Keeper): Promise<void> {
  const { d } = k;
  for (const remote of d.remotes) {
    const o = await observe(k, remote);
    const other = otherLeaseAction(remote, o, k.mono(), d.timing);
    if (other.kind === "takeover") {
      await d.witness.update(
        key(remote),
        JSON.stringify({ holder: d.region, epoch: other.epoch, renewedAt: k.wall() } satisfies Lease),
        o!.revision,
      );
      d.log.error(
        { remote, epoch: other.epoch, stillForMs: Math.round(k.mono() - o!.changedAt) },
        "region silent past its lease: taken over; adopting its unfinished tasks",
      );
      d.onEvent?.({
        kind: "takeover",
        region: d.region,
        remote,
        epoch: other.epoch,
        at: k.wall(),
        stillForMs: Math.round(k.mono() - o!.changedAt),
      });
      await adoptIfOwed(k, remote, await observe(k, remote));
    } else await adoptIfOwed(k, remote, o);
  }
}

export function startLeaseKeeper(d: KeeperDeps): LeaseKeeper {
  const k: Keeper = {
    d,
    mono: d.monotonic ?? (() => performance.now()),
    wall: d.wall ?? Date.now,
    seen: {},
    heldUntil: 0,
  };
  let lastError: string | undefined;
  const retryMs = Math.min(d.retryMs ?? LEASE_RETRY_MS, d.renewMs);

  /** One round; true when it completed (false: the witness failed it, retried after retryMs). */
  const tick = async (): Promise<boolean> => {
    const startedAt = k.wall();
    try {
      const until = await renewOwn(k, startedAt);
      fenceWatch(k, until);
      await watchRemotes(k);
      await planRound(k, until);
      if (lastError) d.log.info({ region: d.region }, "witness reachable again");
      lastError = undefined;
      return true;
    } catch (err) {
      const msg = (err as Error).message;
      fenceWatch(k, 0);
      // Unreachable witness: no renewal, so the solvers' view lapses at its validUntil by itself.
      if (msg !== lastError)
        d.log.error(
          { region: d.region, err: msg },
          "lease round failed (witness unreachable or a concurrent change); solvers stop submitting when the lease view lapses",
        );
      lastError = msg;
      return false;
    }
  };

  let running = true;
  const loop = (async () => {
    while (running) {
      const t0 = k.mono();
      const ok = await tick();
      await Bun.sleep(Math.max(50, (ok ? d.renewMs : retryMs) - (k.mono() - t0)));
    }
  })();
  return {
    observed: () => ({ ...k.seen }),
    tick: async () => {
      await tick();
    },
    async stop() {
      running = false;
      await loop;
    },
  };
}
