import { type Db, groupCommit, isConnectionError, type TaskRow, tasks } from "@pipeline/shared/db";
import { cancelTaskRow } from "@pipeline/shared/tasks";
import { and, eq, sql } from "drizzle-orm";

/** What a submission writes: a fresh `queued` row. */
export interface QueuedRow {
  id: string;
  owner: string;
  idempotencyKey: string | null;
  requestHash: string;
  region: string;
  type: string;
  priority: string;
  params: unknown;
  callbackUrl: string | null;
  deadlineAt: Date | null;
  /** A scheduled task's instants (docs/scheduling.md); absent: null. */
  notBefore?: Date | null;
  needBy?: Date | null;
  startAt?: Date | null;
  /** The warm pool that submits it (docs/warm-pools.md); absent: null. */
  poolId?: string | null;
}

export interface TaskStore {
  /** Inserts a `queued` row; returns its timestamps, or undefined when the id already exists. */
  insertQueued(row: QueuedRow): Promise<{ createdAt: Date; deadlineAt: Date | null } | undefined>;
  get(id: string): Promise<TaskRow | undefined>;
  /** Several rows in one query (the facade's bulk `res.php?action=get&ids=`); missing ids are left out. */
  getMany(ids: readonly string[]): Promise<TaskRow[]>;
  /** Removes a row we inserted but could not publish, if nothing happened to it since. */
  deleteUnpublished(id: string): Promise<void>;
  ping(): Promise<void>;
  /** Cancels a task that is not terminal; undefined when it is not the client's (not owned by `owner`) or already final. */
  cancel(id: string, owner: string): Promise<TaskRow | undefined>;
  /** failed -> queued with a fresh deadline and attempt count (a dead-letter redrive), for a task owned by `owner`. */
  redrive(id: string, owner: string, deadlineMs: number): Promise<TaskRow | undefined>;
  /** Undoes a redrive whose publish failed. */
  undoRedrive(row: TaskRow): Promise<void>;
}

/** The gateway's Postgres adapter: it writes only fresh `queued` rows, and reads. */
export function createTaskStore(db: Db): TaskStore {
  // `turn`: the submissions of one event-loop turn share a statement (clients answered by the
  // same batch come back together; the first of them no longer goes alone). Two statements on
  // the wire: a batch that forms while one commits (its fsync) starts at once instead of after it.
  // Ingest of 32 clients (`bun bench/ab-ingest.ts`, 6 paired rounds): +7% submissions/s with 2,
  // +9% with 4, CPU per submission unchanged (Postgres +0.003-0.005 ms, smaller batches).
  const insert = groupCommit(insertBatch(db), { batchWide: isConnectionError, turn: true, maxInFlight: 2 });
  // The reads every GET, long-poll wake-up and res.php makes, built once: drizzle builds a query's
  // SQL from the schema on each call (~0.2 ms of CPU for this one, 6x its execution from here).
  const byId = db
    .select()
    .from(tasks)
    .where(eq(tasks.id, sql.placeholder("id")))
    .limit(1)
    .prepare("gateway_task_by_id");
  const byIds = db
    .select()
    .from(tasks)
    .where(sql`${tasks.id} = any(${sql.placeholder("ids")}::uuid[])`)
    .prepare("gateway_tasks_by_ids");
  return {
    insertQueued: insert,
    async get(id) {
      const read = async () => (await byId.execute({ id }))[0];
      // A read is safe to repeat: after a Postgres restart the pool's first use of a dead
      // connection fails; the retry gets a fresh one.
      return read().catch(async (err) => {
        if (!isConnectionError(err)) throw err;
        await Bun.sleep(100);
        return read();
      });
    },
    async getMany(ids) {
      if (ids.length === 0) return [];
      const read = () => byIds.execute({ ids: [...ids] });
      return read().catch(async (err) => {
        if (!isConnectionError(err)) throw err;
        await Bun.sleep(100);
        return read();
      });
    },
    async deleteUnpublished(id) {
      // Through the owner's function (packages/shared/src/db/roles.ts): the gateway's role has no
      // DELETE on tasks, and the function deletes only a queued row nothing has touched.
      await db.$client`select public.delete_unpublished_task(${id}::uuid)`;
    },
    cancel(id, owner) {
      // The guarded UPDATE the recovery console's bulk cancel shares (@pipeline/shared/tasks).
      return cancelTaskRow(db, id, owner);
    },
    async redrive(id, owner, deadlineMs) {
      const out = await db
        .update(tasks)
        .set({
          state: "queued",
          version: sql`${tasks.version} + 1`,
          attempts: 0,
          redrives: sql`${tasks.redrives} + 1`,
          providerId: null,
          deadlineAt: sql`now() + ${`${deadlineMs} milliseconds`}::interval`,
          completedAt: null,
          updatedAt: sql`now()`,
        })
        .where(and(eq(tasks.id, id), eq(tasks.owner, owner), eq(tasks.state, "failed")))
        .returning();
      return out[0];
    },
    async undoRedrive(row) {
      await db
        .update(tasks)
        .set({ state: "failed", version: sql`${tasks.version} + 1`, completedAt: sql`now()`, updatedAt: sql`now()` })
        .where(and(eq(tasks.id, row.id), eq(tasks.state, "queued"), eq(tasks.version, row.version)));
    },
    async ping() {
      await db.execute(sql`select 1`);
    },
  };
}

type Inserted = { createdAt: Date; deadlineAt: Date | null } | undefined;

/**
 * Group-committed inserts: the submissions arriving while one INSERT commits go together in the
 * next, one statement (one commit, one WAL flush) for all of them instead of one fsync each. The
 * batch travels as one JSON array (`jsonb_to_recordset`): one native JSON.stringify, where ten
 * per-column arrays cost postgres.js an escape per value (issue 13: 8-15 µs of the gateway's CPU
 * per row less, Postgres no more). Two submissions of the same id in one batch: the first inserts,
 * the second is answered "exists" (and takes the replay path). The deadline returned is the one sent.
 */
function insertBatch(db: Db) {
  return async (batch: QueuedRow[]): Promise<Inserted[]> => {
    const first = new Map<string, number>();
    const rows: Record<string, unknown>[] = [];
    for (let i = 0; i < batch.length; i++) {
      const r = batch[i]!;
      if (first.has(r.id)) continue;
      first.set(r.id, i);
      rows.push({
        id: r.id,
        owner: r.owner,
        idem: r.idempotencyKey,
        hash: r.requestHash,
        region: r.region,
        type: r.type,
        priority: r.priority,
        params: r.params,
        cb: r.callbackUrl,
        deadline: r.deadlineAt,
        nb: r.notBefore ?? null,
        nby: r.needBy ?? null,
        sa: r.startAt ?? null,
        pool: r.poolId ?? null,
      });
    }
    const out = await db.$client<{ id: string; created_at: Date | string }[]>`
      insert into tasks (id, owner, idempotency_key, request_hash, region, type, priority, params, callback_url, deadline_at, not_before, need_by, start_at, pool_id, state)
      select v.id, v.owner, v.idem, v.hash, v.region, v.type, v.priority, v.params, v.cb, v.deadline, v.nb, v.nby, v.sa, v.pool, 'queued'
      from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
           as v(id uuid, owner text, idem text, hash text, region text, type text, priority text, params jsonb, cb text, deadline timestamptz, nb timestamptz, nby timestamptz, sa timestamptz, pool uuid)
      on conflict (id) do nothing
      returning id, created_at`;
    const created = new Map<string, Date | string>();
    for (const r of out) created.set(r.id, r.created_at);
    return batch.map((r, i) => {
      const at = first.get(r.id) === i ? created.get(r.id) : undefined;
      return at === undefined ? undefined : { createdAt: new Date(at), deadlineAt: r.deadlineAt };
    });
  };
}
