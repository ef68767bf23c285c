import { TERMINAL_STATES } from "./schemas/task.ts";
import type { Priority } from "./schemas/task-types.ts";
import { sha256 } from "./sha256.ts";

/** Stream names are per region so two regions can share one NATS domain in tests. */
export const streams = {
  tasks: (region: string) => `TASKS_${region.toUpperCase()}`,
  events: (region: string) => `EVENTS_${region.toUpperCase()}`,
  dlq: (region: string) => `DLQ_${region.toUpperCase()}`,
  /** Image bodies kept out of EVENTS (docs/security.md, "Image bodies"): gateway writes, recovery reads. */
  bodies: (region: string) => `BODIES_${region.toUpperCase()}`,
} as const;

export const DEFAULT_SHARDS = 16;
export const LANES: readonly Priority[] = ["high", "normal", "low"];

/** A region name is one subject token. */
export const REGION_PATTERN = /^[a-z0-9_-]+$/;
const Token = REGION_PATTERN;

/** A region name is one subject token: lower-case letters, digits, '-' and '_'. */
export function assertRegion(region: string): string {
  if (!Token.test(region)) throw new Error(`REGION must match ${Token} (got "${region}")`);
  return region;
}

/** KV bucket names, per region (the leases bucket is the witness's own). */
export const buckets = {
  config: (region: string) => `config_${assertRegion(region).replace(/-/g, "_")}`,
  workers: (region: string) => `workers_${assertRegion(region).replace(/-/g, "_")}`,
  /** The region's lease view (written by its keeper, read by its solvers) and adoption records. */
  region: (region: string) => `region_${assertRegion(region).replace(/-/g, "_")}`,
  /** The witness's bucket of region leases (on the witness's own server). */
  leases: () => "leases",
  /** The region's shard assignment (which solver version pulls which shard: @pipeline/shared/shards). */
  rollout: (region: string) => `rollout_${assertRegion(region).replace(/-/g, "_")}`,
  /** Notifications already sent (one key per event: @pipeline/shared/notify). */
  notify: (region: string) => `notify_${assertRegion(region).replace(/-/g, "_")}`,
};

/** Stable shard of a task id: the first 4 bytes of its sha256 (big-endian), modulo the shard count. Never changes (the rollout's shard owners; subjects.test.ts). */
export function shardOf(taskId: string, shards = DEFAULT_SHARDS): number {
  const d = sha256(taskId);
  return (((d[0]! << 24) | (d[1]! << 16) | (d[2]! << 8) | d[3]!) >>> 0) % shards;
}

/**
 * `tasks.<region>.<lane>.<shard>`: the subject a task message is published on; with a fair-share
 * group (docs/fair-share.md), `tasks.<region>.<lane>.g-<group>.<shard>` (five tokens: the lane's
 * own filters, four tokens, never match it, so each group has its own consumer per lane).
 */
export function taskSubject(region: string, lane: Priority, shard: number, group?: string): string {
  return group ? `tasks.${region}.${lane}.g-${group}.${shard}` : `tasks.${region}.${lane}.${shard}`;
}

/**
 * `tasks.<region>.scheduled.<task id>`: the held message of a scheduled task (`notBefore`/`needBy`,
 * docs/scheduling.md). A message schedule on TASKS: the server publishes its body on the task's
 * lane subject at the schedule's time and removes it. No lane consumer filters this subject.
 */
export function scheduleSubject(region: string, taskId: string): string {
  return `tasks.${region}.scheduled.${taskId}`;
}

/** Wildcard covering every task subject of a region (the TASKS stream's subjects). */
export function taskSubjects(region: string): string {
  return `tasks.${region}.>`;
}

/** Filter of one lane's consumer. */
export function laneFilter(region: string, lane: Priority, group?: string): string {
  return group ? `tasks.${region}.${lane}.g-${group}.*` : `tasks.${region}.${lane}.*`;
}

/**
 * Durable consumer name of a (region, lane, version) group; a fair-share group's consumer adds
 * `-g-<group>` (a version has no `-`, so the version is what comes before it: versionOfConsumer).
 */
export function laneConsumer(region: string, lane: Priority, version: string, group?: string): string {
  return `solver_${region}_${lane}_${version}${group ? `-g-${group}` : ""}`.replace(/[^A-Za-z0-9_-]/g, "_");
}

/** The version and fair-share group of a lane consumer's name, given what follows `solver_<region>_<lane>_`. */
export function versionOfConsumer(rest: string): { version: string; group?: string } {
  const i = rest.indexOf("-g-");
  return i < 0 ? { version: rest } : { version: rest.slice(0, i), group: rest.slice(i + 3) };
}

/** `events.<region>.<kind>`. */
export function eventSubject(region: string, kind: string): string {
  return `events.${region}.${kind}`;
}

/** The final-state event kinds, named for the terminal states (`completed`, `failed`, `cancelled`): what callbacks are sent for. */
export const FINAL_EVENT_KINDS: readonly string[] = TERMINAL_STATES;
const FINAL_KINDS: ReadonlySet<string> = new Set(FINAL_EVENT_KINDS);

/** Whether an event of this kind ends its task (one of FINAL_EVENT_KINDS). */
export function isFinalEventKind(kind: string): boolean {
  return FINAL_KINDS.has(kind);
}

/**
 * `events.<region>.<kind>.hook`: a final event of a task with a callback URL, the only events the
 * callback notifier consumes (issue 13: the final event of every other task was delivered to it
 * and acked for nothing). Consumers of `events.<region>.>` see both forms alike.
 */
export function hookEventSubject(region: string, kind: string): string {
  return `events.${region}.${kind}.hook`;
}

/** Where an event is published: a final event whose `data.callback` is true on its hook subject, every other on `events.<region>.<kind>`. */
export function subjectOfEvent(region: string, ev: { kind: string; data?: { callback?: unknown } | null }): string {
  return ev.data?.callback === true && isFinalEventKind(ev.kind)
    ? hookEventSubject(region, ev.kind)
    : eventSubject(region, ev.kind);
}

/** The kind an event's subject names (`events.<region>.<kind>[.hook]`). */
export function eventKindOf(subject: string): string {
  return subject.split(".")[2] ?? "";
}

export function eventSubjects(region: string): string {
  return `events.${region}.>`;
}

/** `dlq.<region>.<type>`: dead-lettered tasks. */
export function dlqSubject(region: string, type: string): string {
  return `dlq.${region}.${type}`;
}

export function dlqSubjects(region: string): string {
  return `dlq.${region}.>`;
}

/** `bodies.<region>.<task id>`: the image body (or bodies) of one task, kept out of EVENTS. */
export function bodySubject(region: string, taskId: string): string {
  return `bodies.${region}.${taskId}`;
}

export function bodySubjects(region: string): string {
  return `bodies.${region}.>`;
}

/**
 * `tokens.<region>`: another region's gateway asks this region's gateways for a task's token (core
 * request/reply, never stored: apps/gateway/src/adapters/home-tokens.ts).
 */
export function tokenSubject(region: string): string {
  return `tokens.${assertRegion(region)}`;
}

/** Every region's `tokens.<region>`: a gateway asks any home, including one its server does not carry. */
export function tokenSubjects(): string {
  return "tokens.*";
}
