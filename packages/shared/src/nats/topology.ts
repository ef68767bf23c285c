import {
  AckPolicy,
  type ConsumerConfig,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiError,
  type JetStreamManager,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
  type StreamInfo,
} from "@nats-io/jetstream";
import { nanos } from "@nats-io/transport-node";
import { lanePauses } from "../lanes/read.ts";
import type { Priority } from "../schemas/task-types.ts";
import {
  bodySubjects,
  dlqSubjects,
  eventSubjects,
  FINAL_EVENT_KINDS,
  hookEventSubject,
  LANES,
  laneConsumer,
  laneFilter,
  streams,
  taskSubjects,
} from "../subjects.ts";

/** Raised when the server did not keep a field as we asked (a normalized value; on 2.9, a dropped unknown field). */
export class TopologyError extends Error {
  override name = "TopologyError";
  constructor(
    message: string,
    readonly field: string,
  ) {
    super(message);
  }
}

export function isNotFound(err: unknown): boolean {
  return err instanceof JetStreamApiError && (err.code === 10059 || err.code === 10014);
}

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
/** Two RFC 3339 times that name the same instant (the server trims trailing zeros: `.710Z` reads back `.71Z`). */
function sameInstant(a: unknown, b: unknown): boolean {
  return (
    typeof a === "string" && typeof b === "string" && ISO.test(a) && ISO.test(b) && Date.parse(a) === Date.parse(b)
  );
}

/** Every field of `want` must read back equal from the server. */
export function assertStuck(
  kind: string,
  name: string,
  want: Record<string, unknown>,
  got: Record<string, unknown>,
): void {
  for (const [field, value] of Object.entries(want)) {
    if (value === undefined) continue;
    const actual = got[field];
    if (JSON.stringify(actual) !== JSON.stringify(value) && !sameInstant(actual, value)) {
      throw new TopologyError(
        `${kind} ${name}: field "${field}" did not stick (asked ${JSON.stringify(value)}, server has ${JSON.stringify(actual)}); is the server older than the feature?`,
        field,
      );
    }
  }
}

/**
 * The copies a stream (a bucket's too) is to have when `asked` for and the server holds `has`:
 * replicas only ever go up, so an app configured for fewer (a dev default, an old binary) does
 * not scale a production R3 stream down to R1.
 */
export function replicasToKeep(asked: number, has: number): number {
  return Math.max(asked, has);
}

/**
 * Creates the stream or updates its mutable fields, then reads its config back and throws a
 * TopologyError if any field we set is not what the server holds.
 */
export async function ensureStream(
  jsm: JetStreamManager,
  asked: Partial<StreamConfig> & { name: string },
  o: { neverLowerLimits?: boolean } = {},
): Promise<void> {
  let cfg = asked;
  try {
    const info = await jsm.streams.info(cfg.name);
    if (cfg.num_replicas !== undefined)
      cfg = { ...cfg, num_replicas: replicasToKeep(cfg.num_replicas, info.config.num_replicas) };
    // With `neverLowerLimits` (EVENTS): a limit an operator raised (docs/runbook.md, Sizing EVENTS) is kept.
    if (o.neverLowerLimits) cfg = { ...cfg, ...keptLimits(cfg, info.config) };
    const differs = Object.entries(cfg).some(
      ([k, v]) => JSON.stringify((info.config as unknown as Record<string, unknown>)[k]) !== JSON.stringify(v),
    );
    if (differs) await jsm.streams.update(cfg.name, cfg);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    await jsm.streams.add(cfg);
  }
  const back = await jsm.streams.info(cfg.name);
  assertStuck("stream", cfg.name, cfg, back.config as unknown as Record<string, unknown>);
}

/** The server's max_bytes, max_msgs and max_age where they are larger (or unlimited) than asked. */
function keptLimits(asked: Partial<StreamConfig>, has: StreamConfig): Partial<StreamConfig> {
  const out: Partial<StreamConfig> = {};
  const larger = (a: number | undefined, h: number) => a !== undefined && a > 0 && (h <= 0 || h > a);
  if (larger(asked.max_bytes, has.max_bytes)) out.max_bytes = has.max_bytes;
  if (larger(asked.max_msgs, has.max_msgs)) out.max_msgs = has.max_msgs;
  if (larger(asked.max_age, has.max_age)) out.max_age = has.max_age;
  return out;
}

/** Creates a durable consumer if absent (never recreates one: see DESIGN on WorkQueue ghosts), then verifies its config. */
export async function ensureConsumer(
  jsm: JetStreamManager,
  stream: string,
  cfg: Partial<ConsumerConfig> & { durable_name: string },
): Promise<void> {
  let exists = true;
  try {
    await jsm.consumers.info(stream, cfg.durable_name);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    exists = false;
  }
  if (!exists) await jsm.consumers.add(stream, cfg);
  else {
    const { durable_name: _d, filter_subject: _f, ...mutable } = cfg;
    // nats.js merges an update into the config it has just read: a `pause_until` read before an
    // operator's pause (or the 1970 of a resume) would be sent back and undo it. Not sent unless
    // asked (undefined is dropped): the server keeps a consumer's pause through an update without it.
    await jsm.consumers.update(stream, cfg.durable_name, { ...mutable, pause_until: cfg.pause_until } as never);
  }
  const back = await jsm.consumers.info(stream, cfg.durable_name);
  assertStuck("consumer", `${stream}/${cfg.durable_name}`, cfg, back.config as unknown as Record<string, unknown>);
}

export interface TopologyOptions {
  region: string;
  /** Duplicate window for task publishes; idempotency beyond it lives in Postgres. */
  duplicateWindowMs?: number;
  /** Copies of each stream in the region's cluster (STREAM_REPLICAS: 3 on a 3-node region; never lowered). */
  replicas?: number;
  eventsMaxAgeMs?: number;
  eventsMaxBytes?: number;
}

export function tasksStreamConfig(o: TopologyOptions): Partial<StreamConfig> & { name: string } {
  return {
    name: streams.tasks(o.region),
    subjects: [taskSubjects(o.region)],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    num_replicas: o.replicas ?? 1,
    duplicate_window: nanos(o.duplicateWindowMs ?? 10 * 60_000),
    // Message schedules (nats-server 2.12+): a task with notBefore/needBy is held on
    // `tasks.<region>.scheduled.<id>` until its start (docs/scheduling.md); set on an existing stream too.
    allow_msg_schedules: true,
  } as Partial<StreamConfig> & { name: string };
}

export function eventsStreamConfig(o: TopologyOptions): Partial<StreamConfig> & { name: string } {
  return {
    name: streams.events(o.region),
    subjects: [eventSubjects(o.region)],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    num_replicas: o.replicas ?? 1,
    max_age: nanos(o.eventsMaxAgeMs ?? 7 * 24 * 3600_000),
    max_bytes: o.eventsMaxBytes ?? 1024 * 1024 * 1024,
    duplicate_window: nanos(2 * 60_000),
  };
}

export function dlqStreamConfig(o: TopologyOptions): Partial<StreamConfig> & { name: string } {
  return {
    name: streams.dlq(o.region),
    subjects: [dlqSubjects(o.region)],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    num_replicas: o.replicas ?? 1,
    max_age: nanos(30 * 24 * 3600_000),
    duplicate_window: nanos(2 * 60_000),
  };
}

export interface LaneConsumerOptions {
  region: string;
  lane: Priority;
  version: string;
  /** A fair-share group's consumer of the lane (its own subjects), or the lane's own. */
  group?: string;
  ackWaitMs: number;
  maxDeliver?: number;
  maxAckPending?: number;
  /**
   * The lane's pause (`pause_until`, from its record: @pipeline/shared/lanes `lanePauses`): a
   * consumer created while its lane is paused starts paused. Absent: the pause is not touched.
   */
  pauseUntil?: string;
}

export function laneConsumerConfig(o: LaneConsumerOptions): Partial<ConsumerConfig> & { durable_name: string } {
  return {
    durable_name: laneConsumer(o.region, o.lane, o.version, o.group),
    filter_subject: laneFilter(o.region, o.lane, o.group),
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: nanos(o.ackWaitMs),
    max_deliver: o.maxDeliver ?? -1,
    max_ack_pending: o.maxAckPending ?? 20_000,
    ...(o.pauseUntil ? { pause_until: o.pauseUntil } : {}),
  };
}

/**
 * Another region's EVENTS, mirrored into this region's JetStream domain under the same name
 * (`EVENTS_<OTHER>`): the server copies them over the leafnode link (`$JS.<other>.API`, the other
 * region's domain is its name) and resumes after a cut without gaps. Only Limits streams are
 * mirrored: never TASKS (a mirror's consumer removes WorkQueue messages; docs/regions.md).
 */
export function eventsMirrorConfig(remote: string, replicas = 1): Partial<StreamConfig> & { name: string } {
  return {
    name: streams.events(remote),
    mirror: {
      name: streams.events(remote),
      external: { api: `$JS.${remote}.API`, deliver: "" },
    } as StreamConfig["mirror"],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    num_replicas: replicas,
    max_age: nanos(7 * 24 * 3600_000),
  };
}

/**
 * How long BODIES keeps an image body by default (docs/security.md, "Image bodies"): the snapshot
 * defaults (a snapshot every 5 min, assess failing past 15 min) plus 6 h of margin for a restore
 * after a loss and for the other region's mirror to catch up after a cut.
 */
export const DEFAULT_BODIES_MAX_AGE_MS = 15 * 60_000 + 6 * 3600_000;

/**
 * The body retention the snapshot settings need: a body must outlive the newest snapshot that
 * may be restored (up to `SNAPSHOT_MAX_AGE_MS` old before assess fails, and at least one interval)
 * plus `marginMs` (the restore itself, a mirror catching up).
 */
export function bodiesMaxAgeFor(o: {
  snapshotIntervalMs: number;
  snapshotMaxAgeMs: number;
  marginMs?: number;
}): number {
  return Math.max(o.snapshotIntervalMs, o.snapshotMaxAgeMs) + (o.marginMs ?? 6 * 3600_000);
}

/**
 * BODIES_<REGION>: the image bodies of accepted tasks, one message per task on
 * `bodies.<region>.<task id>`, kept out of EVENTS (which every notifier, console and SSE reader
 * sees) and only for as long as a restore or the other region's replica can need them.
 */
export function bodiesStreamConfig(o: {
  region: string;
  replicas?: number;
  maxAgeMs?: number;
}): Partial<StreamConfig> & { name: string } {
  return {
    name: streams.bodies(o.region),
    subjects: [bodySubjects(o.region)],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    num_replicas: o.replicas ?? 1,
    max_age: nanos(o.maxAgeMs ?? DEFAULT_BODIES_MAX_AGE_MS),
    max_msgs_per_subject: 1,
    duplicate_window: nanos(2 * 60_000),
  };
}

/** Another region's BODIES, mirrored here exactly like its EVENTS (eventsMirrorConfig), with this side's retention. */
export function bodiesMirrorConfig(
  remote: string,
  replicas = 1,
  maxAgeMs = DEFAULT_BODIES_MAX_AGE_MS,
): Partial<StreamConfig> & { name: string } {
  return {
    name: streams.bodies(remote),
    mirror: {
      name: streams.bodies(remote),
      external: { api: `$JS.${remote}.API`, deliver: "" },
    } as StreamConfig["mirror"],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    num_replicas: replicas,
    max_age: nanos(maxAgeMs),
  };
}

/**
 * Creates the stream when it does not exist and otherwise leaves it alone: for a provisioning that
 * must not undo what another sets (a test harness and BODIES, whose retention recovery sets).
 */
export async function ensureStreamPresent(
  jsm: JetStreamManager,
  cfg: Partial<StreamConfig> & { name: string },
): Promise<void> {
  try {
    await jsm.streams.info(cfg.name);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    try {
      await jsm.streams.add(cfg);
    } catch (e) {
      // Another provisioning created it in between.
      if (!/already in use|already exists/i.test((e as Error).message)) throw e;
    }
  }
}

/** How long an app waits at start for the streams, buckets and consumers the administering side creates. */
export const TOPOLOGY_WAIT_MS = 60_000;

/** A stream, bucket or consumer an app needs is not there: the administering side has not created it (yet). */
export class TopologyMissingError extends Error {
  override name = "TopologyMissingError";
  /** `missing`: what is not there, each with its kind ("stream TASKS_EU", "consumer EVENTS_EU/notifier_hooks_eu"). */
  constructor(readonly missing: string[]) {
    super(
      `${missing.join(", ")} ${missing.length > 1 ? "do" : "does"} not exist: the apps create no stream, bucket or consumer (their NATS users may not); the recovery service creates them at start (@pipeline/shared/provision, provisionRegion), as do the dev stack and the test harness. Start it first (docs/security.md, "NATS: who administers")`,
    );
  }
}

export interface RequireOptions {
  /** Waits this long for what is missing (0: not at all); then throws TopologyMissingError. */
  waitMs?: number;
  everyMs?: number;
  /** Told what is still missing, about every 5 s of waiting. */
  onWait?: (missing: string[]) => void;
  /** How a missing name is reported (default: `stream <name>`). */
  label?: (name: string) => string;
}

/** Polls `probe` (undefined: missing) for each name until all are there or `waitMs` passed; `label` names a missing one. */
async function waitFor<T>(
  names: string[],
  probe: (name: string) => Promise<T | undefined>,
  label: (name: string) => string,
  o: RequireOptions,
): Promise<T[]> {
  const until = Date.now() + (o.waitMs ?? 0);
  let told = Date.now();
  for (;;) {
    const found = await Promise.all(names.map(probe));
    const missing = names.filter((_, i) => found[i] === undefined).map(label);
    if (!missing.length) return found as T[];
    if (Date.now() >= until) throw new TopologyMissingError(missing);
    if (Date.now() - told >= 5000) {
      told = Date.now();
      o.onWait?.(missing);
    }
    await Bun.sleep(Math.min(o.everyMs ?? 500, Math.max(1, until - Date.now())));
  }
}

/**
 * The info of each stream, read (STREAM.INFO only: what an app's user may do); waits up to
 * `waitMs` for those missing, then throws a TopologyMissingError naming them. Any other error
 * (a permission refused) is thrown at once.
 */
export async function requireStreams(
  jsm: JetStreamManager,
  names: string[],
  o: RequireOptions = {},
): Promise<StreamInfo[]> {
  return waitFor(
    names,
    (name) =>
      jsm.streams.info(name).catch((err) => {
        if (isNotFound(err)) return undefined;
        throw err;
      }),
    o.label ?? ((name) => `stream ${name}`),
    o,
  );
}

/** Streams of one region (TASKS, EVENTS, DLQ), created or verified. */
export async function ensureStreams(jsm: JetStreamManager, o: TopologyOptions): Promise<void> {
  await ensureStream(jsm, tasksStreamConfig(o));
  await ensureStream(jsm, eventsStreamConfig(o), { neverLowerLimits: true });
  await ensureStream(jsm, dlqStreamConfig(o));
}

/**
 * The lane consumers of one version group. `pauses`: each paused lane's `pause_until` (by default
 * read from the lane records, @pipeline/shared/lanes `lanePauses`): carried into its consumer, so
 * one created while its lane is paused starts paused; a lane without one keeps whatever pause its
 * consumer has.
 */
export async function ensureLaneConsumers(
  jsm: JetStreamManager,
  o: Omit<LaneConsumerOptions, "lane" | "pauseUntil"> & { pauses?: Partial<Record<Priority, string>> },
): Promise<void> {
  const { pauses = await lanePauses(jsm, o.region), ...rest } = o;
  for (const lane of LANES) {
    const pauseUntil = pauses?.[lane];
    try {
      await ensureConsumer(
        jsm,
        streams.tasks(o.region),
        laneConsumerConfig({ ...rest, lane, ...(pauseUntil ? { pauseUntil } : {}) }),
      );
    } catch (err) {
      // TASKS is a work queue: two consumers may not filter the same subjects. Another solver
      // version's lane consumers hold them; say which, instead of the server's bare refusal.
      if (!/filtered consumer not unique/i.test((err as Error).message)) throw err;
      throw new Error(
        `the lane consumers of another solver version hold ${streams.tasks(o.region)} (\`nats consumer ls ${streams.tasks(o.region)}\` names them): solver ${o.version} cannot consume beside them; two versions share a region only through the rollout service (apps/rollout), or stop the other version and delete its consumers`,
      );
    }
  }
}

/**
 * The webhook notifier's durable consumer on EVENTS: the final events of tasks with a callback
 * URL, published on their hook subjects (`events.<region>.<kind>.hook`); the final event of a
 * task without one reaches no notifier. From the stream's start: nothing else publishes there.
 */
export function notifierHooksConsumerConfig(region: string): Partial<ConsumerConfig> & { durable_name: string } {
  return {
    durable_name: `notifier_hooks_${region}`.replace(/[^A-Za-z0-9_-]/g, "_"),
    filter_subjects: FINAL_EVENT_KINDS.map((k) => hookEventSubject(region, k)),
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: nanos(30_000),
    max_deliver: -1,
    max_ack_pending: 1000,
  };
}

/**
 * The notifier's consumer (notifierHooksConsumerConfig) created, or its mutable fields updated;
 * returns its name. Two provisionings creating it at once: the one that loses the race finds it made.
 */
export async function ensureNotifierConsumer(jsm: JetStreamManager, region: string): Promise<string> {
  const stream = streams.events(region);
  const hooks = notifierHooksConsumerConfig(region);
  await ensureConsumer(jsm, stream, hooks).catch(async (err) => {
    const made = await jsm.consumers.info(stream, hooks.durable_name).then(
      () => true,
      (e) => {
        if (isNotFound(e)) return false;
        throw e;
      },
    );
    if (!made) throw err;
  });
  return hooks.durable_name;
}

/**
 * The name of the notifier's consumer as the administering side made it (ensureNotifierConsumer,
 * run by provisionRegion), waited for up to `waitMs`. Creates nothing: the solver's user may only
 * read it.
 */
export async function notifierConsumerName(
  jsm: JetStreamManager,
  region: string,
  o: RequireOptions = {},
): Promise<string> {
  const stream = streams.events(region);
  const [name] = await waitFor(
    [notifierHooksConsumerConfig(region).durable_name],
    (name) =>
      jsm.consumers.info(stream, name).then(
        () => name,
        (err) => {
          if (isNotFound(err)) return undefined;
          throw err;
        },
      ),
    (name) => `consumer ${stream}/${name}`,
    o,
  );
  return name!;
}
