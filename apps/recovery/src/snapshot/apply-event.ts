import { bookCharges } from "@pipeline/shared/db";
import { type TaskEvent, taskRequest } from "@pipeline/shared/schemas";
import { BodyRefs } from "@pipeline/shared/tasks";
import type postgres from "postgres";
import { z } from "zod";
import { BODY_UNAVAILABLE, type BodySource } from "./bodies.ts";

/** What one event did to the rows. */
export type Applied = "inserted" | "applied" | "stale" | "missing" | "skipped" | "bodyUnavailable";

/** Every outcome at zero: the counters of a replay or replicator. */
export const noneApplied = (): Record<Applied, number> => ({
  inserted: 0,
  applied: 0,
  stale: 0,
  missing: 0,
  skipped: 0,
  bodyUnavailable: 0,
});

/**
 * The task an `accepted` event carries, checked with the gateway's own schema (issue 14): the
 * type, the params of that type, the priority and the callback URL as `POST /v1/tasks` takes them.
 * The bounds the gateway may be configured with are taken at their widest (images up to its
 * IMAGE_MAX_BYTES ceiling; private and http callbacks, which dev stacks allow: the solver checks a
 * callback again with its own policy before sending). Anything the gateway could not have published
 * is skipped, never written.
 */
const GatewayTask = taskRequest({ imageMaxBytes: 8 * 1024 * 1024, callbacks: { allowHttp: true, allowPrivate: true } });
const Accepted = z.object({
  owner: z.string().min(1).max(128),
  type: z.string(),
  priority: z.string(),
  params: z.record(z.string(), z.unknown()),
  /** The bodies taken out of `params` (image tasks): on BODIES, named here by sha256 and size. */
  bodies: BodyRefs.optional(),
  requestHash: z.string().min(1).max(128),
  idempotencyKey: z.string().max(256).nullable().optional(),
  callbackUrl: z.string().nullable().optional(),
  deadlineAt: z.iso.datetime({ offset: true }).nullable().optional(),
  /** A scheduled task's instants (docs/scheduling.md): back into the row, so its start is kept. */
  notBefore: z.iso.datetime({ offset: true }).nullable().optional(),
  needBy: z.iso.datetime({ offset: true }).nullable().optional(),
  startAt: z.iso.datetime({ offset: true }).nullable().optional(),
});
type Accepted = z.infer<typeof Accepted>;
/** Stands in for a body that is gone, so that the rest of the task is still checked. */
const STAND_IN = "AAAA";
const gatewayWouldPublish = (a: Accepted, params: Record<string, unknown>) =>
  GatewayTask.safeParse({
    type: a.type,
    priority: a.priority,
    params,
    ...(a.callbackUrl ? { callbackUrl: a.callbackUrl } : {}),
  }).success;
const Str = z.string().nullable().optional().catch(null);
/**
 * A `completed` event: `token` (older solvers) or `tokenStored: true` (the token stays in the
 * row only, issue 16.3). Without a token the row is completed with token null: the client sees
 * `expired` (TOKEN_UNAVAILABLE, packages/shared/src/tasks/view.ts) and solves again.
 */
const Completed = z
  .object({
    token: z.string().optional(),
    tokenStored: z.boolean().optional(),
    userAgent: Str,
    expiresAt: Str,
    completedAt: Str,
    providerId: Str,
    /** The ledger's charge of the answer (solvers since the ledger): booked again by a replay. */
    charge: z
      .object({
        providerTaskId: z.string().min(1),
        provider: z.string().min(1),
        region: z.string().min(1),
        solverVersion: z.string().min(1),
        amountMicros: z.number().int().min(0),
        priceSource: z.enum(["provider", "estimate"]),
      })
      .optional()
      .catch(undefined),
  })
  .refine((c) => c.token !== undefined || c.tokenStored === true, "a completed event carries token or tokenStored");
const Loose = z.object({
  code: Str,
  worker: Str,
  providerId: Str,
  keyRef: Str,
  deadLetter: Str,
  attempt: z.number().int().optional().catch(undefined),
  redrives: z.number().int().optional().catch(undefined),
});

type Tx = postgres.TransactionSql | postgres.Sql;

/**
 * Applies one EVENTS entry to `tasks`, idempotently by version: an event whose version is not
 * newer than the row's changes nothing, so replaying a range twice, or events the dump already
 * holds, is harmless. `accepted` inserts the row when missing (it carries the whole task);
 * `submitted` carries its claim's version (the solver checkpoints the provider id inside a claim,
 * and says `solving` with it), so it applies at that version too: the claim's state and the
 * provider id, which keeps a restored task polling its provider task instead of paying for a
 * second one. Lease fields are cleared: a restored `solving` row may be taken over at once (the
 * provider id, when known, is resumed).
 */
export async function applyEvent(
  sql: Tx,
  ev: TaskEvent,
  bodies?: BodySource,
  o: { ledger?: boolean } = {},
): Promise<Applied> {
  const at = new Date(ev.at);
  if (ev.kind === "accepted") return applyAccepted(sql, ev, bodies);
  const d = Loose.parse(ev.data ?? {});
  const v = ev.version;
  let r: postgres.RowList<postgres.Row[]>;
  switch (ev.kind) {
    case "submitted":
      // Also the claim's event (a solver says `solving` with it, not before it): at the claim's
      // version it does what `solving` does, and the provider id besides.
      r = await sql`
        update tasks set state = 'solving', version = greatest(version, ${v}), attempts = greatest(attempts, ${d.attempt ?? 0}),
          lease_owner = coalesce(${d.worker ?? null}, lease_owner), lease_until = null, started_at = coalesce(started_at, ${at}),
          provider_id = ${d.providerId ?? null}, provider_key_ref = ${d.keyRef ?? null}, submit_started_at = null, submit_owner = null, updated_at = greatest(updated_at, ${at})
        where id = ${ev.taskId} and version <= ${v} and state in ('queued', 'solving', 'retrying') and params <> '{}'::jsonb and ${d.providerId ?? null}::text is not null`;
      break;
    case "solving":
      r = await sql`
        update tasks set state = 'solving', version = ${v}, attempts = greatest(attempts, ${d.attempt ?? 0}), lease_owner = ${d.worker ?? null}, lease_until = null,
          started_at = coalesce(started_at, ${at}), updated_at = ${at}
        where id = ${ev.taskId} and version < ${v} and params <> '{}'::jsonb`;
      break;
    case "retrying":
      r = await sql`
        update tasks set state = 'retrying', version = ${v}, error_code = ${d.code ?? null}, lease_owner = null, lease_until = null, updated_at = ${at}
        where id = ${ev.taskId} and version < ${v} and params <> '{}'::jsonb`;
      break;
    case "completed": {
      const c = Completed.safeParse(ev.data ?? {});
      if (!c.success) return "skipped";
      r = await sql`
        update tasks set state = 'completed', version = ${v}, token = ${c.data.token ?? null}, user_agent = ${c.data.userAgent ?? null},
          token_expires_at = ${c.data.expiresAt ? new Date(c.data.expiresAt) : null}, completed_at = ${c.data.completedAt ? new Date(c.data.completedAt) : at},
          provider_id = coalesce(${c.data.providerId ?? null}, provider_id), lease_owner = null, lease_until = null, error_code = null, error_message = null, updated_at = ${at}
        where id = ${ev.taskId} and version < ${v}`;
      // A replayed completion's charge (a restore of this region's own EVENTS; the replicator does
      // not: each region's ledger holds its own charges), booked once however often replayed.
      if (o.ledger && c.data.charge) await bookCharges(sql, [{ taskId: ev.taskId, ...c.data.charge, at }]);
      break;
    }
    case "failed":
      r = await sql`
        update tasks set state = 'failed', version = ${v}, error_code = coalesce(${d.code ?? null}, error_code),
          error_message = ${d.deadLetter ? `dead-lettered: ${d.deadLetter}` : null}, lease_owner = null, lease_until = null, completed_at = ${at}, updated_at = ${at}
        where id = ${ev.taskId} and version < ${v}`;
      break;
    case "cancelled":
      r = await sql`
        update tasks set state = 'cancelled', version = ${v}, lease_owner = null, lease_until = null, completed_at = ${at}, updated_at = ${at}
        where id = ${ev.taskId} and version < ${v}`;
      break;
    case "redriven":
      // The event does not carry the new deadline: the original allowance is granted again from the redrive.
      r = await sql`
        update tasks set state = 'queued', version = ${v}, attempts = 0, redrives = coalesce(${d.redrives ?? null}::int, redrives + 1), provider_id = null, completed_at = null,
          deadline_at = case when deadline_at is null then null else ${at}::timestamptz + (deadline_at - created_at) end, updated_at = ${at}
        where id = ${ev.taskId} and version < ${v} and params <> '{}'::jsonb`;
      break;
    case "adopted":
      // A failover moved the task's home (docs/regions.md): whatever its version, the adopter owns
      // it from now on, and this region's solvers no longer claim it.
      r = await sql`
        update tasks set region = ${ev.region}, lease_owner = null, lease_until = null, updated_at = greatest(updated_at, ${at})
        where id = ${ev.taskId} and region <> ${ev.region}`;
      if (r.count === 0) {
        const exists = await sql`select 1 from tasks where id = ${ev.taskId}`;
        return exists.length ? "stale" : "missing";
      }
      break;
  }
  if (r.count === 1) return "applied";
  const exists = await sql`select 1 from tasks where id = ${ev.taskId}`;
  return exists.length ? "stale" : "missing";
}

/**
 * `accepted` inserts the row when missing (the event carries the task, its bodies by reference).
 * A body is fetched from BODIES (`bodies`) and checked against the event's sha256 and size; when
 * it is gone (older than BODIES_MAX_AGE_MS) or does not match, the row is still rebuilt, as a
 * failed task with `BODY_UNAVAILABLE` and no params (nothing to solve: every redrive refuses
 * erased params, and later solving/retrying/redriven events leave it alone), never queued without
 * its body.
 */
async function applyAccepted(sql: Tx, ev: TaskEvent, bodies: BodySource | undefined): Promise<Applied> {
  const d = Accepted.safeParse(ev.data ?? {});
  if (!d.success) return "skipped";
  const a = d.data;
  const refs = a.bodies ?? [];
  const lookup =
    refs.length === 0
      ? { ok: true as const, values: {} }
      : bodies
        ? await bodies(ev.region, ev.taskId, refs)
        : { ok: false as const, reason: "no BODIES to read" };
  const standIn = Object.fromEntries(refs.map((r) => [r.field, STAND_IN]));
  if (!gatewayWouldPublish(a, { ...a.params, ...(lookup.ok ? lookup.values : standIn) })) return "skipped";
  const at = new Date(ev.at);
  const deadline = a.deadlineAt ? new Date(a.deadlineAt) : null;
  const instant = (v: string | null | undefined) => (v ? new Date(v) : null);
  if (lookup.ok) {
    const r = await sql`
      insert into tasks (id, owner, idempotency_key, request_hash, region, type, priority, params, state, version, deadline_at, callback_url,
                         not_before, need_by, start_at, created_at, updated_at)
      values (${ev.taskId}, ${a.owner}, ${a.idempotencyKey ?? null}, ${a.requestHash}, ${ev.region}, ${a.type}, ${a.priority}, ${JSON.stringify({ ...a.params, ...lookup.values })}::text::jsonb,
              'queued', ${ev.version}, ${deadline}, ${a.callbackUrl ?? null},
              ${instant(a.notBefore)}, ${instant(a.needBy)}, ${instant(a.startAt)}, ${at}, ${at})
      on conflict (id) do nothing`;
    return r.count === 1 ? "inserted" : "stale";
  }
  const message = `image body not available when the task was rebuilt from EVENTS (${refs.map((r) => `${r.field}: sha256 ${r.sha256.slice(0, 12)}…, ${r.size} bytes`).join("; ")}): ${lookup.reason}; submit the task again`;
  const r = await sql`
    insert into tasks (id, owner, idempotency_key, request_hash, region, type, priority, params, state, version, deadline_at, callback_url, error_code, error_message, completed_at, created_at, updated_at)
    values (${ev.taskId}, ${a.owner}, ${a.idempotencyKey ?? null}, ${a.requestHash}, ${ev.region}, ${a.type}, ${a.priority}, '{}'::jsonb,
            'failed', ${ev.version}, ${deadline}, ${a.callbackUrl ?? null}, ${BODY_UNAVAILABLE}, ${message}, ${at}, ${at}, ${at})
    on conflict (id) do nothing`;
  return r.count === 1 ? "bodyUnavailable" : "stale";
}
