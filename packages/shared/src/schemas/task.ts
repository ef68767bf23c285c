import { z } from "zod";
import { Priority, TaskType } from "./task-types.ts";

/** Stored states. `expired` is derived at read time from `result.expiresAt`. */
export const TaskState = z.enum(["queued", "solving", "retrying", "completed", "failed", "cancelled"]);
export type TaskState = z.infer<typeof TaskState>;

export const VisibleState = z.enum([...TaskState.options, "expired"]);
export type VisibleState = z.infer<typeof VisibleState>;

/** The row states no transition leaves (but a redrive of `failed`): the one list the apps use. */
export const TERMINAL_STATES: readonly TaskState[] = ["completed", "failed", "cancelled"];

/** The statuses a client sees that do not change any more: the terminal states, and `expired`. */
export const FINAL_STATUSES: readonly VisibleState[] = [...TERMINAL_STATES, "expired"];

/** What `GET /v1/tasks/:id` answers. */
export const TaskView = z.object({
  id: z.uuid(),
  type: TaskType,
  priority: Priority,
  status: VisibleState,
  attempts: z.number().int(),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
  completedAt: z.iso.datetime().nullable(),
  /** A scheduled task's instants as accepted, and when it goes (went) to its lane (docs/scheduling.md); absent when not given. */
  notBefore: z.iso.datetime().optional(),
  needBy: z.iso.datetime().optional(),
  startAt: z.iso.datetime().optional(),
  result: z
    .object({ token: z.string(), expiresAt: z.iso.datetime().nullable(), userAgent: z.string().optional() })
    .optional(),
  error: z.object({ code: z.string(), message: z.string().optional() }).optional(),
});
export type TaskView = z.infer<typeof TaskView>;

export const TaskAccepted = z.object({ id: z.uuid(), status: z.literal("queued") });
export type TaskAccepted = z.infer<typeof TaskAccepted>;

/** The JetStream message on TASKS: only the id; Postgres holds the task. */
export const TaskMessage = z.object({
  id: z.uuid(),
  type: TaskType,
  priority: Priority,
  /** The owner's fair-share group (docs/fair-share.md): the message goes on the group's subjects of its lane. */
  group: z
    .string()
    .regex(/^[a-z0-9]{1,16}$/)
    .optional(),
});
export type TaskMessage = z.infer<typeof TaskMessage>;

/** An event on EVENTS: every state change of a task. */
export const TaskEvent = z.object({
  taskId: z.uuid(),
  kind: z.enum([
    "accepted",
    "solving",
    "submitted",
    "retrying",
    "completed",
    "failed",
    "cancelled",
    "redriven",
    "adopted",
  ]),
  state: TaskState,
  version: z.number().int(),
  region: z.string(),
  at: z.iso.datetime(),
  data: z.record(z.string(), z.unknown()).optional(),
});
export type TaskEvent = z.infer<typeof TaskEvent>;

/** A stream message's body as a TaskEvent, or undefined when it is not JSON or not a task event (alerts, breaker events). */
export function taskEventOf(m: { json(): unknown }): TaskEvent | undefined {
  try {
    const r = TaskEvent.safeParse(m.json());
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}

/** RFC 9457 problem details, with the fields at fault. */
export const Problem = z.object({
  type: z.string(),
  title: z.string(),
  status: z.number().int(),
  detail: z.string().optional(),
  instance: z.string().optional(),
  requestId: z.string().optional(),
  errors: z.array(z.object({ field: z.string(), message: z.string() })).optional(),
});
export type Problem = z.infer<typeof Problem>;
