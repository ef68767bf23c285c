import type { Db } from "@pipeline/shared/db";
import type { Priority } from "@pipeline/shared/schemas";
import type { PoolConfig, PoolCounts, PoolType } from "../domain/pools.ts";

/** A pool as stored (docs/warm-pools.md). */
export interface Pool extends PoolConfig {
  id: string;
  owner: string;
  name: string;
  misses: number;
  createdAt: Date;
  updatedAt: Date;
}

/** A token handed out by a take. */
export interface Taken {
  taskId: string;
  token: string;
  userAgent: string | null;
  solvedAt: Date;
}

export type PutResult = { pool: Pool; created: boolean } | { limit: number };

export interface PoolStore {
  /**
   * Creates or changes the owner's pool `name`. The same type and params: size, max age and
   * priority change in place. Other type or params: the old pool is closed (its ready tokens are
   * never handed out) and a new one takes the name. `{limit}`: the owner has `maxPerOwner` pools.
   */
  put(owner: string, name: string, cfg: PoolConfig, maxPerOwner: number): Promise<PutResult>;
  get(owner: string, name: string): Promise<Pool | undefined>;
  list(owner: string): Promise<Pool[]>;
  /** Every live pool of every owner (the keeper's round). */
  live(): Promise<Pool[]>;
  /** Closes the pool and returns it; undefined when the owner has none of that name. */
  remove(owner: string, name: string): Promise<Pool | undefined>;
  /**
   * Hands out the oldest ready token still within maxAge, exactly once (row lock, skip locked).
   * With `key` (the take's Idempotency-Key) the token is the key's: a take with the same key
   * again, or at the same time, answers it (`replayed`) and hands out no other.
   */
  take(pool: Pool, key?: string): Promise<(Taken & { replayed?: boolean }) | undefined>;
  miss(pool: Pool): Promise<void>;
  counts(pool: Pool): Promise<PoolCounts>;
  /** What the ledger booked for the pool's tasks (charges less refunds), micro-dollars. */
  ledgerMicros(pool: Pool): Promise<number>;
  /**
   * One keeper round of the pool under its advisory lock (transaction-scoped, try: a gateway
   * that does not get it skips the pool this tick). `fill` runs with the lock held. False: not taken.
   */
  withLock(pool: Pool, fill: (s: KeeperView) => Promise<void>): Promise<boolean>;
}

/** What the keeper reads and writes while it holds a pool's lock. */
export interface KeeperView {
  /** Marks ready tokens older than maxAge wasted; returns how many. */
  expire(): Promise<number>;
  /** The ready tokens' solve times (epoch ms), the tasks still in flight, and the failures in a row (domain/pools.ts PoolState). */
  state(): Promise<{
    readySolvedAt: number[];
    inProgress: number;
    failedStreak: number;
    lastFailedAtMs: number | null;
  }>;
}

interface PoolDbRow {
  id: string;
  owner: string;
  name: string;
  type: PoolType;
  params: Record<string, unknown> | string;
  priority: Priority;
  size: number;
  max_age_ms: number;
  misses: string | number;
  created_at: Date;
  updated_at: Date;
}

const toPool = (r: PoolDbRow): Pool => ({
  id: r.id,
  owner: r.owner,
  name: r.name,
  type: r.type,
  params: typeof r.params === "string" ? (JSON.parse(r.params) as Record<string, unknown>) : r.params,
  priority: r.priority,
  size: r.size,
  maxAgeMs: r.max_age_ms,
  misses: Number(r.misses),
  createdAt: new Date(r.created_at),
  updatedAt: new Date(r.updated_at),
});

/** The advisory lock namespaces of warm pools (two-int form): this and hashtext(pool id) for a keeper round, this + 1 and hashtext(owner) for a PUT. */
const LOCK_SPACE = 0x77706f6f; // "wpoo"

const COLS = "id, owner, name, type, params, priority, size, max_age_ms, misses, created_at, updated_at";

interface TakenRow {
  id: string;
  token: string;
  user_agent: string | null;
  completed_at: Date;
}

/** A ready token of the pool: solved, never handed out nor wasted, younger than maxAge, not past its expiry. */
const READY = `t.pool_id = $1 and t.state = 'completed' and t.token is not null
  and t.pool_taken_at is null and t.pool_wasted_at is null
  and t.completed_at > now() - make_interval(secs => $2::float8 / 1000)
  and (t.token_expires_at is null or t.token_expires_at > now())`;

export function createPoolStore(db: Db): PoolStore {
  const sql = db.$client;
  const unsafe = <T>(q: string, args: unknown[]) => sql.unsafe(q, args as never[]) as unknown as Promise<T[]>;
  return {
    put: (owner, name, cfg, max) => putPool(db, owner, name, cfg, max),
    async get(owner, name) {
      const rows = await unsafe<PoolDbRow>(
        `select ${COLS} from warm_pools where owner = $1 and name = $2 and deleted_at is null`,
        [owner, name],
      );
      return rows[0] ? toPool(rows[0]) : undefined;
    },
    async list(owner) {
      const rows = await unsafe<PoolDbRow>(
        `select ${COLS} from warm_pools where owner = $1 and deleted_at is null order by name`,
        [owner],
      );
      return rows.map(toPool);
    },
    async live() {
      const rows = await unsafe<PoolDbRow>(`select ${COLS} from warm_pools where deleted_at is null`, []);
      return rows.map(toPool);
    },
    async remove(owner, name) {
      const rows = await sql<PoolDbRow[]>`update warm_pools set deleted_at = now(), updated_at = now()
        where owner = ${owner} and name = ${name} and deleted_at is null returning *`;
      return rows[0] ? toPool(rows[0]) : undefined;
    },
    async take(pool, key) {
      const taken = (rows: TakenRow[], replayed: boolean) => {
        const r = rows[0];
        return r
          ? {
              taskId: r.id,
              token: r.token,
              userAgent: r.user_agent,
              solvedAt: new Date(r.completed_at),
              ...(replayed ? { replayed } : {}),
            }
          : undefined;
      };
      // The inner select locks one ready row and skips rows another take holds: concurrent takes
      // each get a different token, and the outer guard keeps a row handed out once.
      const hand = (q: typeof sql) =>
        q.unsafe(
          `update tasks set pool_taken_at = now(), pool_take_key = $3
           where id = (select t.id from tasks t where ${READY} order by t.completed_at limit 1 for update skip locked)
             and pool_taken_at is null and pool_wasted_at is null
           returning id, token, user_agent, completed_at`,
          [pool.id, pool.maxAgeMs, key ?? null] as never[],
        ) as unknown as Promise<TakenRow[]>;
      if (key === undefined) return taken(await hand(sql), false);
      // With a key: the takes of one pool and key one after the other (a transaction-scoped lock
      // on both), so a second one finds the first's token, not a row the first has locked
      // (skipped: it would answer "none ready") or another token.
      return (await sql.begin(async (tx) => {
        await tx`select pg_advisory_xact_lock(${LOCK_SPACE + 2}, hashtext(${`${pool.id}:${key}`}))`;
        const before = await tx.unsafe(
          `select id, token, user_agent, completed_at from tasks where pool_id = $1 and pool_take_key = $2`,
          [pool.id, key],
        );
        if (before.length > 0) return taken(before as unknown as TakenRow[], true);
        return taken(await hand(tx as unknown as typeof sql), false);
      })) as ReturnType<typeof taken>;
    },
    async miss(pool) {
      await sql`update warm_pools set misses = misses + 1 where id = ${pool.id}`;
    },
    counts: (pool) => poolCounts(db, pool),
    async ledgerMicros(pool) {
      const [r] = await sql<{ net: string }[]>`
        select coalesce(sum(l.amount_micros), 0)::text as net
        from ledger_all l join tasks t on t.id = l.task_id where t.pool_id = ${pool.id}`;
      return Number(r!.net);
    },
    withLock: (pool, fill) => withPoolLock(db, pool, fill),
  };
}

async function putPool(db: Db, owner: string, name: string, cfg: PoolConfig, max: number): Promise<PutResult> {
  return db.$client.begin(async (tx) => {
    // One writer per owner at a time: the count and the insert agree (the cap holds under concurrent PUTs).
    await tx`select pg_advisory_xact_lock(${LOCK_SPACE + 1}, hashtext(${owner}))`;
    const [old] = await tx<PoolDbRow[]>`select * from warm_pools
      where owner = ${owner} and name = ${name} and deleted_at is null`;
    if (old && old.type === cfg.type && sameJson(toPool(old).params, cfg.params)) {
      const [r] = await tx<PoolDbRow[]>`update warm_pools
        set size = ${cfg.size}, max_age_ms = ${cfg.maxAgeMs}, priority = ${cfg.priority}, updated_at = now()
        where id = ${old.id} returning *`;
      return { pool: toPool(r!), created: false };
    }
    if (old) await tx`update warm_pools set deleted_at = now(), updated_at = now() where id = ${old.id}`;
    else {
      const [n] = await tx<{ n: number }[]>`select count(*)::int as n from warm_pools
        where owner = ${owner} and deleted_at is null`;
      if (n!.n >= max) return { limit: max };
    }
    const [r] = await tx<PoolDbRow[]>`insert into warm_pools (id, owner, name, type, params, priority, size, max_age_ms)
      values (${Bun.randomUUIDv7()}, ${owner}, ${name}, ${cfg.type}, ${JSON.stringify(cfg.params)}::jsonb,
              ${cfg.priority}, ${cfg.size}, ${cfg.maxAgeMs})
      returning *`;
    return { pool: toPool(r!), created: !old };
  });
}

function sameJson(a: unknown, b: unknown): boolean {
  const canon = (v: unknown): unknown =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(
          Object.keys(v)
            .sort()
            .map((k) => [k, canon((v as Record<string, unknown>)[k])]),
        )
      : v;
  return JSON.stringify(canon(a)) === JSON.stringify(canon(b));
}

async function poolCounts(db: Db, pool: Pool): Promise<PoolCounts> {
  const rows = (await db.$client.unsafe(
    `select count(*) filter (where t.state = 'completed')::int as solved,
            count(*) filter (where t.pool_taken_at is not null)::int as handed_out,
            count(*) filter (where t.pool_wasted_at is not null)::int as wasted,
            count(*) filter (where t.state in ('queued', 'solving', 'retrying'))::int as in_progress,
            count(*) filter (where t.state in ('failed', 'cancelled'))::int as failed,
            count(*) filter (where ${READY})::int as ready
     from tasks t where t.pool_id = $1`,
    [pool.id, pool.maxAgeMs] as never[],
  )) as unknown as Record<string, number>[];
  const r = rows[0]!;
  return {
    solved: r.solved!,
    handedOut: r.handed_out!,
    wasted: r.wasted!,
    inProgress: r.in_progress!,
    ready: r.ready!,
    failed: r.failed!,
    misses: pool.misses,
  };
}

/** How far back the keeper counts a pool's failures in a row (more than any backoff needs: it stops doubling at 5 min). */
const STREAK_LOOKBACK = 200;

async function withPoolLock(db: Db, pool: Pool, fill: (s: KeeperView) => Promise<void>): Promise<boolean> {
  return db.$client.begin(async (tx) => {
    const [l] = await tx<
      { ok: boolean }[]
    >`select pg_try_advisory_xact_lock(${LOCK_SPACE}, hashtext(${pool.id})) as ok`;
    if (!l!.ok) return false;
    const run = <T>(q: string) => tx.unsafe(q, [pool.id, pool.maxAgeMs] as never[]) as unknown as Promise<T[]>;
    await fill({
      async expire() {
        const rows = await run<{ id: string }>(
          `update tasks set pool_wasted_at = now()
           where pool_id = $1 and state = 'completed' and pool_taken_at is null and pool_wasted_at is null
             and (completed_at <= now() - make_interval(secs => $2::float8 / 1000)
                  or token is null or (token_expires_at is not null and token_expires_at <= now()))
           returning id`,
        );
        return rows.length;
      },
      async state() {
        // One statement: the ready tokens and the tasks in flight, and the failures in a row (the
        // pool's newest final tasks, failed or solved, by when they ended, through tasks_pool_idx:
        // those that failed after the newest solved one).
        const [r] = await run<{
          ready: number[] | null;
          in_progress: number;
          failed: number;
          last_failed: number | null;
        }>(
          `with fin as (
             select t.state, t.completed_at from tasks t
             where t.pool_id = $1 and t.state in ('completed', 'failed') and t.completed_at is not null
             order by t.completed_at desc limit ${STREAK_LOOKBACK})
           select s.ready, s.in_progress, k.failed, k.last_failed
           from (select array_agg((extract(epoch from t.completed_at) * 1000)::float8) filter (where ${READY}) as ready,
                        count(*) filter (where t.state in ('queued', 'solving', 'retrying'))::int as in_progress
                 from tasks t where t.pool_id = $1 and t.pool_taken_at is null and t.pool_wasted_at is null
                   and t.state in ('queued', 'solving', 'retrying', 'completed')) s
           cross join (select count(*) filter (where state = 'failed' and completed_at > coalesce(
                         (select max(completed_at) from fin where state = 'completed'), '-infinity'::timestamptz))::int as failed,
                       (extract(epoch from max(completed_at) filter (where state = 'failed')) * 1000)::float8 as last_failed
                       from fin) k`,
        );
        return {
          readySolvedAt: (r?.ready ?? []).map(Number),
          inProgress: r?.in_progress ?? 0,
          failedStreak: r?.failed ?? 0,
          lastFailedAtMs: r?.last_failed ?? null,
        };
      },
    });
    return true;
  }) as Promise<boolean>;
}
