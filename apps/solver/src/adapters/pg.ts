import { and, eq, inArray, isNull, lt, or, sql } from "drizzle-orm";
import { tasks, type Db, type TaskRow } from "@pipeline/shared/db";

export type Claim =
  | { kind: "claimed"; row: TaskRow }
  | { kind: "missing" }
  | { kind: "terminal"; row: TaskRow }
  | { kind: "busy"; leaseLeftMs: number };

/** Every write is guarded by state and lease owner: a worker that lost its lease changes nothing. */
export interface SolverStore {
  /** queued|retrying -> solving, or takes over a `solving` row whose lease expired. */
  claim(id: string, worker: string, leaseMs: number): Promise<Claim>;
  /** Checkpoints the provider id before the first poll; false when the lease was lost. */
  setProviderId(id: string, worker: string, providerId: string): Promise<boolean>;
  /** Forgets the provider task (unsolvable; submit anew), counting the resubmission. */
  clearProviderId(id: string, worker: string): Promise<boolean>;
  complete(id: string, worker: string, r: { token: string; userAgent?: string; expiresAt: Date | null; polls: number }): Promise<TaskRow | undefined>;
  fail(id: string, worker: string, r: { code: string; message?: string; polls: number }): Promise<TaskRow | undefined>;
  /** solving -> retrying (keeps provider_id, so the next claim resumes polling it). */
  release(id: string, worker: string, r: { code?: string; polls: number }): Promise<TaskRow | undefined>;
  /** True while this worker still holds the task (not cancelled, lease not lost). */
  owns(id: string, worker: string): Promise<boolean>;
  /** Extends the lease of every row this worker holds. */
  renewLeases(worker: string, leaseMs: number): Promise<number>;
}

const leaseUntil = (ms: number) => sql`now() + ${`${ms} milliseconds`}::interval`;

export function createSolverStore(db: Db): SolverStore {
  const owned = (id: string, worker: string) => and(eq(tasks.id, id), eq(tasks.state, "solving"), eq(tasks.leaseOwner, worker));
  return {
    async claim(id, worker, leaseMs) {
      const claimed = await db
        .update(tasks)
        .set({
          state: "solving",
          version: sql`${tasks.version} + 1`,
          attempts: sql`${tasks.attempts} + 1`,
          leaseOwner: worker,
          leaseUntil: leaseUntil(leaseMs),
          startedAt: sql`coalesce(${tasks.startedAt}, now())`,
          updatedAt: sql`now()`,
        })
        .where(
          and(
            eq(tasks.id, id),
            or(
              inArray(tasks.state, ["queued", "retrying"]),
              and(eq(tasks.state, "solving"), or(isNull(tasks.leaseUntil), lt(tasks.leaseUntil, sql`now()`), eq(tasks.leaseOwner, worker))),
            ),
          ),
        )
        .returning();
      if (claimed[0]) return { kind: "claimed", row: claimed[0] };
      const rows = await db
        .select({ row: tasks, leftMs: sql<number>`greatest(0, extract(epoch from (${tasks.leaseUntil} - now())) * 1000)::float8` })
        .from(tasks)
        .where(eq(tasks.id, id));
      const found = rows[0];
      if (!found) return { kind: "missing" };
      if (found.row.state === "solving") return { kind: "busy", leaseLeftMs: Number(found.leftMs) };
      return { kind: "terminal", row: found.row };
    },
    async setProviderId(id, worker, providerId) {
      const r = await db
        .update(tasks)
        .set({ providerId, providerSubmissions: sql`${tasks.providerSubmissions} + 1`, updatedAt: sql`now()` })
        .where(owned(id, worker))
        .returning({ id: tasks.id });
      return r.length === 1;
    },
    async clearProviderId(id, worker) {
      const r = await db.update(tasks).set({ providerId: null, updatedAt: sql`now()` }).where(owned(id, worker)).returning({ id: tasks.id });
      return r.length === 1;
    },
    async complete(id, worker, r) {
      const out = await db
        .update(tasks)
        .set({
          state: "completed",
          version: sql`${tasks.version} + 1`,
          token: r.token,
          userAgent: r.userAgent ?? null,
          tokenExpiresAt: r.expiresAt,
          providerPolls: sql`${tasks.providerPolls} + ${r.polls}`,
          leaseOwner: null,
          leaseUntil: null,
          errorCode: null,
          errorMessage: null,
          completedAt: sql`now()`,
          updatedAt: sql`now()`,
        })
        .where(owned(id, worker))
        .returning();
      return out[0];
    },
    async fail(id, worker, r) {
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
    },
    async release(id, worker, r) {
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
    },
    async owns(id, worker) {
      const r = await db.select({ id: tasks.id }).from(tasks).where(owned(id, worker));
      return r.length === 1;
    },
    async renewLeases(worker, leaseMs) {
      const r = await db
        .update(tasks)
        .set({ leaseUntil: leaseUntil(leaseMs) })
        .where(and(eq(tasks.state, "solving"), eq(tasks.leaseOwner, worker)))
        .returning({ id: tasks.id });
      return r.length;
    },
  };
}
