import { sql } from "drizzle-orm";
import { bigint, index, integer, jsonb, pgTable, text, timestamp, uniqueIndex, uuid } from "drizzle-orm/pg-core";
import type { TaskState } from "../../schemas/task.ts";
import type { Priority, TaskType } from "../../schemas/task-types.ts";

/**
 * One row per accepted task: the projection of EVENTS that answers queries and guards every
 * transition (`state` + `version`).
 */
export const tasks = pgTable(
  "tasks",
  {
    id: uuid("id").primaryKey(),
    owner: text("owner").notNull(),
    idempotencyKey: text("idempotency_key"),
    requestHash: text("request_hash").notNull(),
    region: text("region").notNull(),
    type: text("type").$type<TaskType>().notNull(),
    priority: text("priority").$type<Priority>().notNull(),
    params: jsonb("params").notNull(),
    state: text("state").$type<TaskState>().notNull(),
    version: integer("version").notNull().default(0),
    attempts: integer("attempts").notNull().default(0),
    providerId: text("provider_id"),
    /** Which provider key (its hash reference, never the key) owns provider_id: only that key polls it. */
    providerKeyRef: text("provider_key_ref"),
    providerSubmissions: integer("provider_submissions").notNull().default(0),
    providerPolls: integer("provider_polls").notNull().default(0),
    /** Set just before an in.php call, cleared by its outcome: a taker-over waits for it to land. */
    submitStartedAt: timestamp("submit_started_at", { withTimezone: true }),
    submitOwner: text("submit_owner"),
    /**
     * When a claim wrote its own submit marker with a unit of the provider plan (issue 13, slot
     * blocks): until the claimer's next lease the task is counted in its block, not in the table.
     */
    claimedAt: timestamp("claimed_at", { withTimezone: true }),
    leaseOwner: text("lease_owner"),
    leaseUntil: timestamp("lease_until", { withTimezone: true }),
    token: text("token"),
    userAgent: text("user_agent"),
    tokenExpiresAt: timestamp("token_expires_at", { withTimezone: true }),
    deadlineAt: timestamp("deadline_at", { withTimezone: true }),
    /** The client's `notBefore`: the task is not started before it (docs/scheduling.md). */
    notBefore: timestamp("not_before", { withTimezone: true }),
    /** The client's `needBy`: the token should be ready shortly before it; past it unsolved, the task fails (NEED_BY_PASSED). */
    needBy: timestamp("need_by", { withTimezone: true }),
    /** When the task's scheduled message is put on its lane (a message schedule on TASKS); null: at acceptance. */
    startAt: timestamp("start_at", { withTimezone: true }),
    callbackUrl: text("callback_url"),
    /** The warm pool that made this task (docs/warm-pools.md); null: a client's own task. */
    poolId: uuid("pool_id"),
    /** When the pool handed this task's token out (a take); it is never handed out twice. */
    poolTakenAt: timestamp("pool_taken_at", { withTimezone: true }),
    /** When the pool's keeper found the token older than the pool's max age, never handed out. */
    poolWastedAt: timestamp("pool_wasted_at", { withTimezone: true }),
    /** The Idempotency-Key of the take that handed this token out (docs/warm-pools.md): a retry of that take answers the same token. */
    poolTakeKey: text("pool_take_key"),
    redrives: integer("redrives").notNull().default(0),
    errorCode: text("error_code"),
    errorMessage: text("error_message"),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
    startedAt: timestamp("started_at", { withTimezone: true }),
    completedAt: timestamp("completed_at", { withTimezone: true }),
    // The provider's charge for the answer that completed the task, kept on its row (one write
    // per completion, not a ledger row besides): the `ledger_all` view shows it as a ledger entry
    // (docs/money.md). Any other charge of the task (an answer read by a worker that had lost the
    // task) goes into the ledger table; retention moves these columns there before it deletes a row.
    chargeProviderTaskId: text("charge_provider_task_id"),
    chargeProvider: text("charge_provider"),
    chargeRegion: text("charge_region"),
    chargeSolverVersion: text("charge_solver_version"),
    chargeMicros: bigint("charge_micros", { mode: "number" }),
    chargePriceSource: text("charge_price_source"),
    chargedAt: timestamp("charged_at", { withTimezone: true }),
  },
  (t) => [
    index("tasks_open_idx").on(t.state, t.updatedAt).where(sql`state in ('queued','solving','retrying')`),
    index("tasks_owner_created_idx").on(t.owner, t.createdAt),
    // Retention (apps/recovery/src/retention): finished rows by when they finished, and live tokens by expiry.
    index("tasks_finished_idx")
      .on(sql`coalesce(${t.completedAt}, ${t.updatedAt})`)
      .where(sql`state in ('completed','failed','cancelled')`),
    index("tasks_token_expiry_idx").on(t.tokenExpiresAt).where(sql`${t.token} is not null`),
    // Finished rows whose params or callback URL are still there: a purged row leaves the index, so a run scans only what is left to do.
    index("tasks_unpurged_idx")
      .on(sql`coalesce(${t.completedAt}, ${t.updatedAt})`)
      .where(sql`state in ('completed','failed','cancelled') and (params <> '{}'::jsonb or callback_url is not null)`),
    // The task explorer (apps/recovery/src/explorer): pages newest first by (created_at, id), by state,
    // and a search by idempotency key, sitekey (equal) and pageurl (prefix, a text_pattern_ops range).
    index("tasks_created_idx").on(t.createdAt, t.id),
    index("tasks_state_created_idx").on(t.state, t.createdAt, t.id),
    index("tasks_idempotency_key_idx").on(t.idempotencyKey).where(sql`${t.idempotencyKey} is not null`),
    index("tasks_sitekey_idx").on(sql`(${t.params}->>'sitekey')`).where(sql`(${t.params}->>'sitekey') is not null`),
    index("tasks_pageurl_idx")
      .on(sql`(${t.params}->>'pageurl') text_pattern_ops`)
      .where(sql`(${t.params}->>'pageurl') is not null`),
    // Warm pools (docs/warm-pools.md): a pool's tasks by when they ended (its figures; the keeper's
    // failures in a row, read newest first), and its open ones by when they were solved (the ready
    // tokens a take locks, the keeper's round): few rows whatever the pool's age.
    index("tasks_pool_idx").on(t.poolId, t.completedAt).where(sql`${t.poolId} is not null`),
    index("tasks_pool_open_idx")
      .on(t.poolId, t.completedAt)
      .where(
        sql`${t.poolId} is not null and ${t.poolTakenAt} is null and ${t.poolWastedAt} is null and ${t.state} in ('queued','solving','retrying','completed')`,
      ),
    // A take's Idempotency-Key hands out one token per pool and key.
    uniqueIndex("tasks_pool_take_key_idx").on(t.poolId, t.poolTakeKey).where(sql`${t.poolTakeKey} is not null`),
    // The ledger's indexes for the charges on task rows (ledger.ts has the same three on the table).
    index("tasks_charged_idx").on(t.chargedAt).where(sql`${t.chargedAt} is not null`),
    index("tasks_charged_owner_idx").on(t.owner, t.chargedAt).where(sql`${t.chargedAt} is not null`),
    index("tasks_charged_version_idx").on(t.chargeSolverVersion, t.id).where(sql`${t.chargedAt} is not null`),
  ],
);

export type TaskRow = typeof tasks.$inferSelect;
export type NewTaskRow = typeof tasks.$inferInsert;
