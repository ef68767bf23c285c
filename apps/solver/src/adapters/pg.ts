import { type Db, type TaskRow, tasks } from "@pipeline/shared/db";
import { and, eq, inArray, isNull, or, sql } from "drizzle-orm";
import type postgres from "postgres";
import type { Charge } from "../domain/charge.ts";
import { type Completed, createBatchedWrites } from "./batched-writes.ts";
import { type CheckpointResult, checkpointResult, createCheckpointWriter } from "./checkpoints.ts";

export type Claim =
  | { kind: "claimed"; row: TaskRow }
  | { kind: "missing" }
  | { kind: "terminal"; row: TaskRow }
  | { kind: "busy"; leaseLeftMs: number };

/** Every write is guarded by state and lease owner: a worker that lost its lease changes nothing. */
export interface SolverStore {
  /** queued|retrying -> solving, or takes over a `solving` row whose lease expired. */
  claim(id: string, worker: string, leaseMs: number): Promise<Claim>;
  /**
   * Marks an in.php call as started (guarded by the lease); false when the task is no longer
   * ours (cancelled, taken over): then nothing may be submitted.
   */
  beginSubmit(id: string, worker: string): Promise<boolean>;
  /** Clears the marker after a submit that created no provider task. */
  endSubmit(id: string, worker: string): Promise<void>;
  /**
   * Checkpoints the provider id before the first poll. The submitter writes it even if its lease
   * was taken over meanwhile (the taker waits for it instead of submitting again);
   * `stillOwner` says whether it may go on polling.
   */
  setProviderId(id: string, worker: string, providerId: string, keyRef: string): Promise<CheckpointResult>;
  get(id: string): Promise<TaskRow | undefined>;
  /** Forgets the provider task (unsolvable; submit anew), counting the resubmission. */
  clearProviderId(id: string, worker: string): Promise<boolean>;
  /** Completes the task (guarded by the lease). */
  complete(
    id: string,
    worker: string,
    r: { token: string; userAgent?: string; expiresAt: Date | null; polls: number; charge?: Charge },
  ): Promise<Completed | undefined>;
  fail(id: string, worker: string, r: { code: string; message?: string; polls: number }): Promise<TaskRow | undefined>;
  /** solving -> retrying (keeps provider_id, so the next claim resumes polling it). */
  release(id: string, worker: string, r: { code?: string; polls: number }): Promise<TaskRow | undefined>;
  /**
   * Extends the lease of the rows this worker is handling right now (by id: a row left behind
   * by a failed invocation must expire, so another worker can take it); a lease with more than
   * 5/6 of its length left is not written.
   */
  renewLeases(worker: string, ids: string[], leaseMs: number): Promise<number>;
}

const leaseUntil = (ms: number) => sql`now() + ${`${ms} milliseconds`}::interval`;

/** The row is `solving` under this worker's lease. */
const owned = (id: string, worker: string) =>
  and(eq(tasks.id, id), eq(tasks.state, "solving"), eq(tasks.leaseOwner, worker));

/**
 * `checkpointSql` is a pool of its own for the provider-id writes, which are group-committed
 * (checkpoints.ts): nothing else queues on it, so the window between the provider's `OK|id` and
 * the checkpoint (the one place where a crash costs a second paid submission) stays about one
 * statement long, also under a burst. Without it the writes go one by one through `db`.
 */
export function createSolverStore(db: Db, checkpointSql?: postgres.Sql, region?: string): SolverStore {
  const checkpoints = checkpointSql ? createCheckpointWriter(checkpointSql) : undefined;
  const batched = createBatchedWrites(db.$client, region ? { region } : {});
  return {
    async claim(id, worker, leaseMs) {
      const claimed = await batched.claim({ id, worker, leaseMs });
      if (claimed) return { kind: "claimed", row: claimed };
      return whyNotClaimed(db, id, region);
    },
    beginSubmit: (id, worker) => batched.beginSubmit({ id, worker }),
    async endSubmit(id, worker) {
      await db
        .update(tasks)
        .set({ submitStartedAt: null, submitOwner: null })
        .where(and(eq(tasks.id, id), eq(tasks.submitOwner, worker)));
    },
    setProviderId(id, worker, providerId, keyRef) {
      if (checkpoints) return checkpoints.write({ id, worker, providerId, keyRef });
      return writeProviderId(db, { id, worker, providerId, keyRef });
    },
    async get(id) {
      return (await db.select().from(tasks).where(eq(tasks.id, id)))[0];
    },
    async clearProviderId(id, worker) {
      const r = await db
        .update(tasks)
        .set({ providerId: null, providerKeyRef: null, updatedAt: sql`now()` })
        .where(owned(id, worker))
        .returning({ id: tasks.id });
      return r.length === 1;
    },
    complete: (id, worker, r) =>
      batched.complete({
        id,
        worker,
        token: r.token,
        userAgent: r.userAgent ?? null,
        expiresAt: r.expiresAt,
        polls: r.polls,
        charge: r.charge ?? null,
      }),
    fail: (id, worker, r) => failTask(db, id, worker, r),
    release: (id, worker, r) => releaseTask(db, id, worker, r),
    renewLeases: (worker, ids, leaseMs) => renewLeases(db, worker, ids, leaseMs),
  };
}

/** A claim that took nothing: the row is missing, another region's or final (`terminal`), or leased by another (`busy`). */
async function whyNotClaimed(db: Db, id: string, region: string | undefined): Promise<Claim> {
  const rows = await db
    .select({
      row: tasks,
      leftMs: sql<number>`greatest(0, extract(epoch from (${tasks.leaseUntil} - now())) * 1000)::float8`,
    })
    .from(tasks)
    .where(eq(tasks.id, id));
  const found = rows[0];
  if (!found) return { kind: "missing" };
  // Another region's row (replicated, or adopted away in a failover): not this region's work.
  if (region && found.row.region !== region) return { kind: "terminal", row: found.row };
  if (found.row.state === "solving") return { kind: "busy", leaseLeftMs: Number(found.leftMs) };
  return { kind: "terminal", row: found.row };
}

/** The provider id written by itself (no checkpoint pool): see SolverStore.setProviderId. */
async function writeProviderId(
  db: Db,
  c: { id: string; worker: string; providerId: string; keyRef: string },
): Promise<CheckpointResult> {
  const r = await db
    .update(tasks)
    .set({
      providerId: c.providerId,
      providerKeyRef: c.keyRef,
      providerSubmissions: sql`${tasks.providerSubmissions} + 1`,
      submitStartedAt: null,
      submitOwner: null,
      updatedAt: sql`now()`,
    })
    .where(
      and(
        eq(tasks.id, c.id),
        isNull(tasks.providerId),
        // The same guard as the checkpoint pool's (checkpoints.ts): this worker's marker or nobody's.
        or(eq(tasks.submitOwner, c.worker), and(isNull(tasks.submitOwner), isNull(tasks.submitStartedAt))),
        inArray(tasks.state, ["queued", "solving", "retrying"]),
      ),
    )
    .returning({ lease_owner: tasks.leaseOwner, state: tasks.state });
  return checkpointResult(c.worker, r[0]);
}

/** solving -> failed (guarded by the lease). */
async function failTask(
  db: Db,
  id: string,
  worker: string,
  r: { code: string; message?: string; polls: number },
): Promise<TaskRow | undefined> {
  const out = await db
    .update(tasks)
    .set({
      state: "failed",
      version: sql`${tasks.version} + 1`,
      errorCode: r.code,
      errorMessage: r.message ?? null,
      providerPolls: sql`${tasks.providerPolls} + ${r.polls}`,
      leaseOwner: null,
      leaseUntil: null,
      completedAt: sql`now()`,
      updatedAt: sql`now()`,
    })
    .where(owned(id, worker))
    .returning();
  return out[0];
}

/** solving -> retrying (guarded by the lease; keeps provider_id). */
async function releaseTask(
  db: Db,
  id: string,
  worker: string,
  r: { code?: string; polls: number },
): Promise<TaskRow | undefined> {
  const out = await db
    .update(tasks)
    .set({
      state: "retrying",
      version: sql`${tasks.version} + 1`,
      errorCode: r.code ?? null,
      providerPolls: sql`${tasks.providerPolls} + ${r.polls}`,
      leaseOwner: null,
      leaseUntil: null,
      updatedAt: sql`now()`,
    })
    .where(owned(id, worker))
    .returning();
  return out[0];
}

/** See SolverStore.renewLeases. */
async function renewLeases(db: Db, worker: string, ids: string[], leaseMs: number): Promise<number> {
  if (ids.length === 0) return 0;
  // One array parameter, not one parameter per id: with 10,000 tasks in flight this runs
  // every few seconds, and a 10,000-parameter statement is megabytes of garbage each time.
  // A lease with more than 5/6 of its length left (claimed or renewed less than a sixth of it
  // ago) is left alone: a task that finishes in seconds costs no renewal write (issue 13, row
  // writes per task), and with the timer every third of the lease a lease is renewed before
  // half of it is gone.
  const r = await db.$client`
    update tasks set lease_until = now() + ${`${leaseMs} milliseconds`}::interval
    where state = 'solving' and lease_owner = ${worker} and id = any(${ids}::uuid[])
      and lease_until < now() + ${`${Math.floor((leaseMs * 5) / 6)} milliseconds`}::interval`;
  return r.count;
}
