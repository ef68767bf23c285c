// The fleet-wide provider thread plan, leased in blocks (issue 13): a task writes no slot row. This
// solver leases, per key, a block of units from `provider_slot_blocks` (one row per solver and key)
// and spends it in memory; the provider tasks already running are counted from `tasks` at every
// lease. The accounting and its invariant are in domain/slot-budget.ts.

import type { Priority } from "@pipeline/shared/schemas";
import type postgres from "postgres";
import { grantFor, KeyBudget, type Unit, type UnitShare, wantFor } from "../domain/slot-budget.ts";

export type { Unit } from "../domain/slot-budget.ts";

export interface ProviderSlots {
  /**
   * A unit of the key's plan for one new provider task: at once when the block has one, else
   * after a lease or a returned unit (high lane first), or undefined after `waitMs`.
   */
  take(
    keyRef: string,
    priority: Priority,
    waitMs: number,
    signal?: AbortSignal,
    share?: UnitShare,
  ): Promise<Unit | undefined>;
  /** Leases every key's block now (the timer does it every SLOT_LEASE_MS/4, and tasks waiting ask for one sooner). */
  lease(): Promise<void>;
  start(): void;
  /** Stops leasing and gives the blocks back (their units free for the other solvers at once). */
  stop(): Promise<void>;
  /** The key's provider tasks in flight across the fleet, as the leases count them (`tasks`). */
  held(keyRef: string): Promise<number>;
  /** The key's plan was exhausted at its last lease (granted less than asked): another account may take the task. */
  full(keyRef: string): boolean;
}

export interface SlotOptions {
  /** This solver (the block's owner). */
  owner: string;
  region: string;
  /** The account's plan (with `shared`, what this solver reports; the region's share is the cap). */
  threads: number;
  /**
   * Several regions on one account: the blocks are leased against the region's share of the plan
   * (provider_plan_shares, written by the region's lease keeper), none when it has no valid share.
   */
  shared?: boolean;
  /** Several accounts (PROVIDERS): each key reference's own plan; `threads` otherwise. */
  threadsOf?: (keyRef: string) => number;
  /** A block's lease (a dead solver's units come back after it, or sooner by the reaper). */
  leaseMs: number;
  /** A submit marker this recent counts as a provider task (an in.php call that may have created one). */
  markerMs: number;
  /** Units a lease asks for beyond what tasks wait for (grown to the units taken since the last lease). */
  minSpare?: number;
  /** Tasks waiting: the next lease no sooner than this after the last. */
  minLeaseGapMs?: number;
  /** A key no unit was taken of for this long (a key rotated away) gives its block up (default 60 s). */
  idleMs?: number;
  /** Waiters of one lane served by fair-share rank (domain/fair-share.ts), lowest first; absent: in arrival order. */
  rank?: (group: string | undefined) => number;
  onError?(err: Error): void;
  now?: () => number;
}

/** Where a starved solver, or one giving units back, says so (LISTEN/NOTIFY): the payload is `<key reference> <owner> starved|freed`. */
const NOTIFY_CHANNEL = "provider_slot_blocks";

interface Figures {
  /** The region's share of the plan (shared plans), 0 when it has none valid now. */
  share: number;
  in_flight: number;
  others: number;
  blocks: number;
  starved: boolean;
}

/** What the leases, the takes and the notices of one solver's slots share. */
interface SlotsState {
  sql: postgres.Sql;
  o: SlotOptions;
  now: () => number;
  budgets: Map<string, KeyBudget>;
  /** Another solver was starved at this key's last lease. */
  othersStarved: Map<string, boolean>;
  /** This solver's last lease of the key granted less than it asked. */
  full: Map<string, boolean>;
  baseGap: number;
  /** Doubles (to 100 ms) while leases hand nothing to the tasks waiting; back to the base when one does. */
  gap: number;
  leasing: Promise<void> | undefined;
  soon: ReturnType<typeof setTimeout> | undefined;
  lastLeaseAt: number;
  stopped: boolean;
}

export function createProviderSlots(sql: postgres.Sql, o: SlotOptions): ProviderSlots {
  const baseGap = o.minLeaseGapMs ?? 20;
  const s: SlotsState = {
    sql,
    o,
    now: o.now ?? Date.now,
    budgets: new Map(),
    othersStarved: new Map(),
    full: new Map(),
    baseGap,
    gap: baseGap,
    leasing: undefined,
    soon: undefined,
    lastLeaseAt: 0,
    stopped: false,
  };
  let timer: ReturnType<typeof setInterval> | undefined;
  let listening: Promise<{ unlisten(): Promise<void> }> | undefined;
  return {
    take: (keyRef, priority, waitMs, signal, share) => take(s, keyRef, priority, waitMs, signal, share),
    lease: () => leaseAll(s),
    start() {
      timer = setInterval(() => void leaseAll(s), Math.max(250, Math.floor(o.leaseMs / 4)));
      listening = sql.listen(NOTIFY_CHANNEL, (payload) => onNotice(s, payload));
      listening.catch((err: Error) => o.onError?.(err));
    },
    async stop() {
      s.stopped = true;
      clearInterval(timer);
      clearTimeout(s.soon);
      await listening?.then((l) => l.unlisten()).catch(() => {});
      for (const b of s.budgets.values()) b.endWaits();
      await s.leasing;
      await sql`delete from provider_slot_blocks where owner = ${o.owner}`.catch((err: Error) => o.onError?.(err));
    },
    full: (keyRef) => s.full.get(keyRef) ?? false,
    async held(keyRef) {
      const [r] = await sql<{ n: number }[]>`select ${inFlight(s, keyRef, false)} as n`;
      return r?.n ?? 0;
    },
  };
}

/**
 * The key's provider tasks in `tasks`: a provider id, or a submit marker recent enough to have
 * made one. For a lease (`excludeFresh`), less the tasks another live solver claimed with a unit
 * since its last lease (`claimed_at` after its block's `updated_at`): its block counts those
 * until its next lease (carried), so they are not counted twice; this solver's own are counted
 * here (its lease carries only what is not visible yet).
 */
function inFlight({ sql, o }: SlotsState, keyRef: string, excludeFresh: boolean) {
  return sql`(select count(*)::int from tasks t
    where t.region = ${o.region} and t.state in ('solving', 'retrying')
      and ((t.provider_id is not null and t.provider_key_ref = ${keyRef})
           or (t.provider_id is null and t.submit_started_at > now() - ${`${o.markerMs} milliseconds`}::interval))
      and not (${excludeFresh} and t.state = 'solving' and t.claimed_at is not null and exists (
        select 1 from provider_slot_blocks b
        where b.key_ref = ${keyRef} and b.owner = t.lease_owner and b.owner <> ${o.owner} and b.lease_until > now() and t.claimed_at > b.updated_at)))`;
}

/** A unit of the key's block now, or once a lease or a returned unit gives one (see ProviderSlots.take). */
async function take(
  s: SlotsState,
  keyRef: string,
  priority: Priority,
  waitMs: number,
  signal?: AbortSignal,
  share?: UnitShare,
): Promise<Unit | undefined> {
  let b = s.budgets.get(keyRef);
  if (!b) s.budgets.set(keyRef, (b = new KeyBudget(keyRef, s.now, s.o.rank)));
  const u = b.tryTake();
  if (u) share?.took();
  if (u || waitMs <= 0 || s.stopped) return u;
  const w = b.wait(priority, share);
  const timeout = setTimeout(w.cancel, waitMs);
  const abort = () => w.cancel();
  signal?.addEventListener("abort", abort, { once: true });
  leaseSoon(s);
  try {
    return await w.promise;
  } finally {
    clearTimeout(timeout);
    signal?.removeEventListener("abort", abort);
  }
}

/** Another solver's notice (`<key> <owner> starved|freed`), answered with a lease when it helps. */
function onNotice(s: SlotsState, payload: string): void {
  const [keyRef = "", from, what] = payload.split(" ");
  // Its own notice: nothing to answer (a starved solver leasing again at once would spin).
  if (from === s.o.owner) return;
  const b = s.budgets.get(keyRef);
  // Another is starved and this one holds units it does not use: give them back now.
  // Another gave units back and tasks wait here: lease now (not after a backed-off gap).
  // Two starved solvers do not wake each other.
  if (b && (what === "starved" ? b.grant - b.consumed > 0 : b.waiting() > 0)) {
    s.gap = s.baseGap;
    leaseSoon(s);
  }
}

/** Leases the key's block: what it wants, granted against the plan, written with its lease. */
async function leaseKey(s: SlotsState, b: KeyBudget): Promise<void> {
  const { o } = s;
  const carried = b.carried();
  const want = wantFor({
    carried,
    waiting: b.waiting(),
    takenSinceLease: b.takenSinceLease,
    minSpare: o.minSpare ?? 2,
    othersStarved: s.othersStarved.get(b.keyRef) ?? false,
    threads: o.threadsOf?.(b.keyRef) ?? o.threads,
  });
  const sentAt = b.leaseSent();
  const started = s.now();
  try {
    const grant = await writeLease(s, b, carried, want);
    s.full.set(b.keyRef, grant < want);
    // Spent until a quarter of the lease before its end as measured from before it was sent.
    b.leased(sentAt, grant, started + Math.floor((o.leaseMs * 3) / 4));
    // `leased` served the waiting tasks it could: a unit handed out (or none waiting) is progress.
    s.gap = b.takenSinceLease > 0 || b.waiting() === 0 ? s.baseGap : Math.min(100, s.gap * 2);
  } catch (err) {
    b.leaseFailed();
    throw err;
  }
}

/**
 * In one transaction under the key's advisory lock: the figures of the plan read, the grant
 * computed, the other solvers told when this one is starved or gives units back, the block
 * written. Returns the grant.
 */
function writeLease(s: SlotsState, b: KeyBudget, carried: number, want: number): Promise<number> {
  const { o } = s;
  return s.sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(hashtextextended(${`provider_slot_blocks:${b.keyRef}`}, 0))`;
    const [f] = await tx<Figures[]>`
      with live as (
        select size, wanted from provider_slot_blocks where key_ref = ${b.keyRef} and owner <> ${o.owner} and lease_until > now()
      )
      select
        coalesce((select case when valid_until > now() then threads else 0 end
          from provider_plan_shares where key_ref = ${b.keyRef}), 0) as share,
        ${inFlight(s, b.keyRef, true)} as in_flight,
        (select coalesce(sum(size), 0)::int from live) as others,
        (select count(*)::int + 1 from live) as blocks,
        (select coalesce(bool_or(wanted > size), false) from live) as starved`;
    const g = grantFor({
      threads: o.shared ? f!.share : (o.threadsOf?.(b.keyRef) ?? o.threads),
      inFlight: f!.in_flight,
      othersReserved: f!.others,
      blocks: f!.blocks,
      othersStarved: f!.starved,
      carried,
      want,
    });
    s.othersStarved.set(b.keyRef, f!.starved);
    // Short of what its waiting tasks need: the other solvers are told (at commit), and one
    // holding units it does not use leases again at once and gives them back (its spare is
    // none while another starves), instead of at its next periodic lease. Giving units back
    // is said the same way (units it had and did not use, fewer after this lease): a solver
    // with tasks waiting leases again at once.
    const gaveBack = b.grant - b.consumed > Math.max(0, g - carried);
    const starved = g < carried + b.waiting();
    if (starved || gaveBack)
      await tx`select pg_notify(${NOTIFY_CHANNEL}, ${`${b.keyRef} ${o.owner} ${starved ? "starved" : "freed"}`})`;
    await tx`
      insert into provider_slot_blocks (key_ref, owner, size, threads, wanted, lease_until, updated_at)
      values (${b.keyRef}, ${o.owner}, ${g}, ${o.threadsOf?.(b.keyRef) ?? o.threads}, ${want}, now() + ${`${o.leaseMs} milliseconds`}::interval, now())
      on conflict (key_ref, owner) do update
        set size = excluded.size, threads = excluded.threads, wanted = excluded.wanted, lease_until = excluded.lease_until, updated_at = now()`;
    return g;
  });
}

/** Leases every key's block (one round at a time); a key idle for `idleMs` gives its block up. */
function leaseAll(s: SlotsState): Promise<void> {
  if (s.leasing) return s.leasing;
  const { o } = s;
  s.lastLeaseAt = s.now();
  s.leasing = (async () => {
    for (const b of s.budgets.values()) {
      try {
        if (b.idle(o.idleMs ?? 60_000)) {
          // Its units are free for the other solvers at once; a later take leases it anew.
          s.budgets.delete(b.keyRef);
          await s.sql`delete from provider_slot_blocks where key_ref = ${b.keyRef} and owner = ${o.owner}`;
          continue;
        }
        await leaseKey(s, b);
      } catch (err) {
        o.onError?.(err as Error);
      }
    }
  })().finally(() => {
    s.leasing = undefined;
    // Tasks still waiting: another lease, no sooner than the gap.
    if (!s.stopped && [...s.budgets.values()].some((b) => b.waiting() > 0)) leaseSoon(s);
  });
  return s.leasing;
}

/** A lease as soon as the gap since the last allows, unless one is already coming. */
function leaseSoon(s: SlotsState): void {
  if (s.soon || s.leasing || s.stopped) return;
  s.soon = setTimeout(
    () => {
      s.soon = undefined;
      void leaseAll(s);
    },
    Math.max(0, s.lastLeaseAt + s.gap - s.now()),
  );
}
