import type { TaskRow } from "@pipeline/shared/db";
import { homeRegionVariants, withHomeRegion } from "@pipeline/shared/regions";
import type { TaskRequest, VisibleState } from "@pipeline/shared/schemas";
import { splitBodies } from "@pipeline/shared/tasks";
import type { TaskStore } from "../adapters/pg.ts";
import type { GatewayDeps } from "../deps.ts";
import { isRefusal, type QuotaRefusal, type Quotas, type Reservation } from "../domain/quotas.ts";
import { type SchedulePlan, scheduledDeadline } from "../domain/schedule.ts";
import { deriveTaskId, requestHash } from "../domain/task-id.ts";
import { toTaskView } from "../domain/task-view.ts";

/** Why a submission was not accepted; `code` is what callers map to their own protocol. */
export class SubmitError extends Error {
  override name = "SubmitError";
  constructor(
    readonly code: "idempotency_mismatch" | "id_collision" | "queue_unavailable" | "quota",
    message: string,
    options?: { cause?: unknown },
    /** With code "quota": which limit, and how to answer it. */
    readonly refusal?: QuotaRefusal,
  ) {
    super(message, options);
  }
}

/** What a submission reads: `config.REGION` (the home region of a new task), `config.regions` (every region in the shared order, for the id's home region byte; default: this region alone), `config.TASK_DEADLINE_MS` (from acceptance). */
export type SubmitDeps = Pick<GatewayDeps, "store" | "queue" | "log" | "now"> & {
  config: Pick<GatewayDeps["config"], "REGION" | "TASK_DEADLINE_MS" | "regions">;
  /** Per API key quotas (issue 14.6); absent: none. */
  quotas?: Pick<Quotas, "admitSubmit">;
  /** The client's fair-share group (docs/fair-share.md): its tasks go on the group's subjects; absent: none. */
  fairShare?: { groupOf(clientId: string): string | undefined };
};

export interface Submitted {
  id: string;
  status: VisibleState;
  /** True when an earlier request with the same Idempotency-Key created the task. */
  replayed: boolean;
}

/**
 * Accepts a validated task: the row (queued) first, then the message with Nats-Msg-Id = task id,
 * resolving only after the PubAck. On a failed publish the fresh row is removed and a
 * `queue_unavailable` SubmitError thrown, so an unaccepted request leaves nothing behind.
 */
export async function submitTask(
  deps: SubmitDeps,
  clientId: string,
  req: TaskRequest,
  idempotencyKey: string | undefined,
  /** A task with notBefore/needBy: its plan (domain/schedule.ts, checked by the caller); absent: now. */
  schedule?: SchedulePlan,
  /** A warm pool's own task (docs/warm-pools.md): the row carries the pool's id. */
  poolId?: string,
): Promise<Submitted> {
  const region = deps.config.REGION;
  const regions = deps.config.regions ?? [region];
  const id = withHomeRegion(deriveTaskId(clientId, idempotencyKey), regions, region);
  const hash = requestHash(req);
  if (idempotencyKey !== undefined) {
    const existing = await earlierTask(deps, id);
    if (existing) return replay(deps, existing, clientId, hash);
  }
  // Quotas, checked for a new task only: a replay (same Idempotency-Key) is always answered.
  let reservation: Reservation | undefined;
  if (deps.quotas) {
    const r = await deps.quotas.admitSubmit(clientId, req);
    if (isRefusal(r)) {
      const existing = idempotencyKey === undefined ? undefined : await deps.store.get(id);
      if (existing) return replay(deps, existing, clientId, hash);
      throw new SubmitError("quota", r.message, undefined, r);
    }
    reservation = r;
  }
  try {
    return await insertAndPublish(
      deps,
      clientId,
      req,
      idempotencyKey,
      id,
      hash,
      () => reservation?.release(),
      schedule,
      poolId,
    );
  } catch (err) {
    reservation?.release();
    throw err;
  }
}

/**
 * The task an earlier request of `clientId` with this Idempotency-Key created (here or, replicated,
 * in another region), as a replay answers it; undefined: none yet. Reads only.
 */
export async function taskOfKey(deps: SubmitDeps, clientId: string, key: string): Promise<Submitted | undefined> {
  const regions = deps.config.regions ?? [deps.config.REGION];
  const id = withHomeRegion(deriveTaskId(clientId, key), regions, deps.config.REGION);
  const existing = (await deps.store.get(id)) ?? (await earlierTask(deps, id));
  if (!existing || existing.owner !== clientId) return undefined;
  return { id: existing.id, status: toTaskView(existing, deps.now()).status, replayed: true };
}

/**
 * The task an Idempotency-Key already created under another id: accepted by another region (its
 * row replicated here). Undefined: none.
 */
async function earlierTask(deps: SubmitDeps, id: string): Promise<TaskRow | undefined> {
  const regions = deps.config.regions ?? [deps.config.REGION];
  const candidates = homeRegionVariants(id, regions).filter((other) => other !== id);
  if (candidates.length === 0) return undefined;
  // One query for every candidate, the first of them found in this order answering.
  const found = new Map((await deps.store.getMany(candidates)).map((r) => [r.id, r]));
  for (const other of candidates) {
    const existing = found.get(other);
    if (existing) return existing;
  }
  return undefined;
}

async function insertAndPublish(
  deps: SubmitDeps,
  clientId: string,
  req: TaskRequest,
  idempotencyKey: string | undefined,
  id: string,
  hash: string,
  notNew: () => void,
  schedule?: SchedulePlan,
  poolId?: string,
): Promise<Submitted> {
  const nowMs = deps.now().getTime();
  const inserted = await deps.store.insertQueued({
    id,
    owner: clientId,
    idempotencyKey: idempotencyKey ?? null,
    requestHash: hash,
    region: deps.config.REGION,
    type: req.type,
    priority: req.priority,
    params: req.params,
    callbackUrl: req.callbackUrl ?? null,
    deadlineAt: schedule
      ? scheduledDeadline(schedule, nowMs, deps.config.TASK_DEADLINE_MS)
      : new Date(nowMs + deps.config.TASK_DEADLINE_MS),
    ...(schedule ? { notBefore: schedule.notBefore, needBy: schedule.needBy, startAt: schedule.startAt } : {}),
    ...(poolId ? { poolId } : {}),
  });
  const group = deps.fairShare?.groupOf(clientId);
  const message = { id, type: req.type, priority: req.priority, ...(group ? { group } : {}) };
  if (!inserted) {
    const existing = await deps.store.get(id);
    notNew();
    if (!existing) throw new SubmitError("id_collision", "task id collision; retry");
    return replay(deps, existing, clientId, hash);
  }
  // Image bodies stay out of EVENTS (every notifier, console and SSE reader sees it): they go to
  // BODIES first, awaited, so an acknowledged task's body is durable outside Postgres before its
  // event names it; no body there, no task (docs/security.md, "Image bodies").
  const split = splitBodies(req.type, req.params);
  if (split.refs.length) await publishBodyOrThrow(deps, id, split.values);
  // The accepted event is the changelog a lost database is rebuilt from: it is published with
  // the task and awaited before the 202 (a failure is logged; the task itself is durable).
  const event = deps.queue
    .publishEvent({
      taskId: id,
      kind: "accepted",
      state: "queued",
      version: 0,
      region: deps.config.REGION,
      at: inserted.createdAt.toISOString(),
      data: {
        owner: clientId,
        type: req.type,
        priority: req.priority,
        params: split.params,
        ...(split.refs.length ? { bodies: split.refs } : {}),
        requestHash: hash,
        idempotencyKey: idempotencyKey ?? null,
        callbackUrl: req.callbackUrl ?? null,
        deadlineAt: inserted.deadlineAt?.toISOString() ?? null,
        ...(schedule ? scheduleData(schedule) : {}),
      },
    })
    .catch((err) => deps.log.error({ taskId: id, err: (err as Error).message }, "accepted event not published"));
  await Promise.all([publishOrThrow(deps, message, true, schedule?.startAt ?? undefined), event]);
  return { id, status: "queued", replayed: false };
}

/** A second request with an Idempotency-Key: the task it created, never a second one. */
async function replay(
  deps: SubmitDeps,
  existing: NonNullable<Awaited<ReturnType<TaskStore["get"]>>>,
  clientId: string,
  hash: string,
): Promise<Submitted> {
  if (existing.owner !== clientId) throw new SubmitError("id_collision", "task id collision; retry");
  if (existing.requestHash !== hash)
    throw new SubmitError("idempotency_mismatch", "this Idempotency-Key was used with another body");
  // The first attempt may have died between insert and publish: publishing again is free (same
  // Nats-Msg-Id). Only the task's home region queues it: a row replicated from another region is
  // that region's work (or its adopter's), never this region's queue's.
  // Its bodies too (same Nats-Msg-Id): the first attempt may have died before BODIES had them.
  if (existing.state === "queued" && existing.region === deps.config.REGION) {
    // A scheduled task not yet due: its schedule again (the same `<id>:schedule`, deduplicated).
    const held = existing.startAt && existing.startAt.getTime() > deps.now().getTime() ? existing.startAt : undefined;
    const split = splitBodies(existing.type, (existing.params ?? {}) as Record<string, unknown>);
    if (split.refs.length) await publishBodyOrThrow(deps, existing.id, split.values, false);
    // On the owner's fair-share group's subjects, as the first attempt put it.
    const group = deps.fairShare?.groupOf(clientId);
    await publishOrThrow(
      deps,
      {
        id: existing.id,
        type: existing.type as TaskRequest["type"],
        priority: existing.priority as TaskRequest["priority"],
        ...(group ? { group } : {}),
      },
      false,
      held,
    );
  }
  return { id: existing.id, status: toTaskView(existing, deps.now()).status, replayed: true };
}

/** The task's bodies on BODIES; a failure removes a fresh row and refuses the task, as a failed task publish does. */
async function publishBodyOrThrow(
  deps: SubmitDeps,
  id: string,
  bodies: Record<string, string>,
  fresh = true,
): Promise<void> {
  try {
    await deps.queue.publishBody({ taskId: id, bodies });
  } catch (err) {
    if (fresh) await deps.store.deleteUnpublished(id).catch(() => {});
    deps.log.warn({ taskId: id, err: (err as Error).message }, "image body not published; task not accepted");
    throw new SubmitError("queue_unavailable", "the task was not accepted; retry (with the same Idempotency-Key)", {
      cause: err,
    });
  }
}

async function publishOrThrow(
  deps: SubmitDeps,
  message: { id: string; type: TaskRequest["type"]; priority: TaskRequest["priority"]; group?: string },
  fresh: boolean,
  /** A scheduled task: held on TASKS until then (a message schedule), else on its lane now. */
  startAt?: Date,
): Promise<void> {
  try {
    if (startAt) await deps.queue.publishScheduled(message, startAt);
    else await deps.queue.publishTask(message);
  } catch (err) {
    if (fresh) await deps.store.deleteUnpublished(message.id).catch(() => {});
    deps.log.warn({ taskId: message.id, err: (err as Error).message }, "publish failed; task not accepted");
    throw new SubmitError("queue_unavailable", "the task was not accepted; retry (with the same Idempotency-Key)", {
      cause: err,
    });
  }
}

/** What the `accepted` event says of a scheduled task (a restore rebuilds the row from it). */
function scheduleData(s: SchedulePlan): Record<string, string | null> {
  return {
    notBefore: s.notBefore?.toISOString() ?? null,
    needBy: s.needBy?.toISOString() ?? null,
    startAt: s.startAt?.toISOString() ?? null,
  };
}
