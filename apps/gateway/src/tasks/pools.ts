// Warm pools' use cases (docs/warm-pools.md): the keeper that keeps each pool full, and the take.
import type { TaskRequest } from "@pipeline/shared/schemas";
import { sha256 } from "@pipeline/shared/sha256";
import type { Pool, PoolStore, Taken } from "../adapters/pools.ts";
import type { GatewayDeps } from "../deps.ts";
import { planRefill, refillLeadMs } from "../domain/pools.ts";
import { SubmitError, type Submitted, submitTask, taskOfKey } from "./submit.ts";

export type PoolDeps = Pick<
  GatewayDeps,
  "store" | "queue" | "log" | "now" | "config" | "quotas" | "solveTimes" | "metrics" | "fence" | "fairShare"
> & { pools: PoolStore };

export interface KeeperOptions {
  /** POOL_TICK_MS: how often each pool is looked at. */
  tickMs: number;
  /** The solve time assumed while the type has no measured p90 (SCHEDULE_DEFAULT_SOLVE_MS). */
  defaultSolveMs: number;
}

/** The metric label of a pool: `<client id>/<name>` (never a key). */
export const poolLabel = (p: Pick<Pool, "owner" | "name">) => `${p.owner}/${p.name}`;

const requestOf = (p: Pool): TaskRequest => ({ type: p.type, params: p.params, priority: p.priority }) as TaskRequest;

/**
 * One keeper round of one pool, under its advisory lock (another gateway holding it: skipped):
 * ready tokens past maxAge are marked wasted, then as many tasks are submitted, through the
 * ordinary submit path, as the planning rule says. Returns how many were submitted (-1: lock not taken).
 */
export async function keepPool(deps: PoolDeps, pool: Pool, o: KeeperOptions): Promise<number> {
  let submitted = 0;
  const label = poolLabel(pool);
  const locked = await deps.pools.withLock(pool, async (view) => {
    const wasted = await view.expire();
    if (wasted > 0) deps.metrics?.poolWasted(label, wasted);
    const state = await view.state();
    const lead = refillLeadMs(deps.solveTimes?.p90Ms(pool.type), o.defaultSolveMs, o.tickMs);
    const now = deps.now().getTime();
    const plan = planRefill({ ...state, size: pool.size, maxAgeMs: pool.maxAgeMs }, now, lead, o.tickMs);
    deps.metrics?.poolReady(label, plan.lasting, state.readySolvedAt.length, state.inProgress);
    if (plan.submit === 0 || (deps.fence && !deps.fence.allows())) return;
    // A failing pool gets one task, a probe, per backoff (domain/pools.ts): said at each probe.
    if (plan.backoffUntilMs !== undefined)
      deps.log.warn(
        { pool: label, failedInARow: state.failedStreak },
        "warm pool failing: its last tasks all failed; one probe task now, the next after a longer wait",
      );
    for (let i = 0; i < plan.submit; i++) {
      try {
        await submitTask(deps, pool.owner, requestOf(pool), undefined, undefined, pool.id);
        submitted++;
      } catch (err) {
        // A quota of the owner or an unavailable queue: the next tick tries again.
        const code = err instanceof SubmitError ? err.code : "error";
        deps.log.warn({ pool: label, code, err: (err as Error).message }, "warm pool refill not submitted");
        break;
      }
    }
    if (submitted > 0) deps.metrics?.poolSubmitted(label, submitted);
  });
  return locked ? submitted : -1;
}

/** The keeper loop every gateway runs: each pool every `tickMs`, one round at a time. */
export function startPoolKeeper(deps: PoolDeps, o: KeeperOptions): { stop(): Promise<void> } {
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<void> = Promise.resolve();
  const round = async () => {
    try {
      const pools = await deps.pools.live();
      deps.metrics?.poolsLive(pools.map(poolLabel));
      for (const pool of pools) {
        if (stopped) return;
        await keepPool(deps, pool, o).catch((err) =>
          deps.log.warn({ pool: poolLabel(pool), err: (err as Error).message }, "warm pool round failed"),
        );
      }
    } catch (err) {
      deps.log.warn({ err: (err as Error).message }, "warm pools not read");
    }
  };
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = round().finally(schedule);
    }, o.tickMs);
  };
  schedule();
  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}

export type TakeResult = { hit: Taken & { replayed?: boolean } } | { miss: Submitted };

/**
 * The Idempotency-Key of the client's own task a take with `key` submits when it misses: the
 * client's key hashed, so it stays 79 characters whatever the key (an `accepted` event's key is at
 * most 256 for a restore to take it).
 */
const missKey = (pool: Pool, key: string) => `pool-take:${pool.id}:${sha256(key, "hex").slice(0, 32)}`;

/**
 * A take: the oldest ready token, handed out once; none ready, a task for the pool's params
 * submitted through the ordinary path (the client's own task, not the pool's) and counted a miss.
 * With `key` (the request's Idempotency-Key) a take asked again answers what the first answered:
 * the same token, or the same task when it missed (never a token ready since); counted once.
 */
export async function takeFromPool(
  deps: PoolDeps,
  pool: Pool,
  beforeMiss: () => void = () => {},
  key?: string,
): Promise<TakeResult> {
  const label = poolLabel(pool);
  if (key !== undefined) {
    const missed = await taskOfKey(deps, pool.owner, missKey(pool, key));
    if (missed) return { miss: missed };
  }
  const hit = await deps.pools.take(pool, key);
  if (hit) {
    if (!hit.replayed) deps.metrics?.poolTake(label, "hit");
    return { hit };
  }
  beforeMiss();
  const miss = await submitTask(deps, pool.owner, requestOf(pool), key === undefined ? undefined : missKey(pool, key));
  if (!miss.replayed) {
    await deps.pools.miss(pool);
    deps.metrics?.poolTake(label, "miss");
  }
  return { miss };
}
