// Which solver version pulls which shard of a region's TASKS (issue 15's versioned consumer
// groups). The assignment lives in the region's `rollout_<region>` KV bucket; each version's
// three lane consumers filter exactly its shards' subjects, and the server refuses an overlap
// (shard-move.int.test.ts), so a shard has one version at a time. Moves shrink the old version's
// consumers before growing the new one's. The pure part is unit-tested; the rest runs against NATS.
import type { ConsumerConfig, JetStreamManager } from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { z } from "zod";
import { readFairShare } from "../fair-share/read.ts";
import { lanePauses } from "../lanes/read.ts";
import { isNotFound, laneConsumerConfig } from "../nats/topology.ts";
import type { Priority } from "../schemas/task-types.ts";
import { buckets, DEFAULT_SHARDS, LANES, laneConsumer, streams, taskSubject, versionOfConsumer } from "../subjects.ts";

export const SHARDS_KEY = "shards";
const Version = z.string().regex(/^[a-z0-9_]{1,32}$/, "lower-case letters, digits and '_'");

export const ShardAssignment = z
  .object({
    /** owners[s] is the version that pulls shard s. */
    owners: z.array(Version).min(1).max(1024),
    updatedAt: z.string(),
    by: z.string().max(128),
  })
  .strict();
export type ShardAssignment = z.infer<typeof ShardAssignment>;

/** Every shard to one version: what the first solver of a region writes. */
export function initialAssignment(
  version: string,
  by: string,
  shards = DEFAULT_SHARDS,
  now = new Date(),
): ShardAssignment {
  return { owners: Array.from({ length: shards }, () => Version.parse(version)), updatedAt: now.toISOString(), by };
}

export function ownedShards(a: ShardAssignment, version: string): number[] {
  return a.owners.flatMap((v, s) => (v === version ? [s] : []));
}

/** Versions that own at least one shard, with their counts. */
export function shareOf(a: ShardAssignment): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of a.owners) out[v] = (out[v] ?? 0) + 1;
  return out;
}

/** The assignment with `shards` given to `to`. */
export function moveShards(
  a: ShardAssignment,
  shards: number[],
  to: string,
  by: string,
  now = new Date(),
): ShardAssignment {
  const owners = [...a.owners];
  for (const s of shards) {
    if (!Number.isInteger(s) || s < 0 || s >= owners.length)
      throw new RangeError(`no shard ${s} (0..${owners.length - 1})`);
    owners[s] = Version.parse(to);
  }
  return { owners, updatedAt: now.toISOString(), by };
}

/** The shards to move so that `to` owns `count` of them (taken from other versions, lowest first). */
export function shardsToReach(a: ShardAssignment, to: string, count: number): number[] {
  const have = ownedShards(a, to).length;
  if (count <= have) return [];
  return a.owners.flatMap((v, s) => (v !== to ? [s] : [])).slice(0, count - have);
}

/** A subject inside the stream nobody publishes on: the filter of a version that owns no shard. */
export function idleSubject(region: string, lane: Priority, version: string, group?: string): string {
  return group ? `tasks.${region}.${lane}.g-${group}.idle_${version}` : `tasks.${region}.${lane}.idle_${version}`;
}

/** The filter subjects of a version's lane consumer (of a fair-share group's subjects, with `group`). */
export function laneFilters(
  region: string,
  lane: Priority,
  version: string,
  owned: number[],
  group?: string,
): string[] {
  return owned.length
    ? owned.map((s) => taskSubject(region, lane, s, group))
    : [idleSubject(region, lane, version, group)];
}

/**
 * The fair-share groups whose consumers a reconcile makes: the region's record (read through the
 * JetStream API, what a solver may do), and any the caller names (the rollout: groups that still
 * have consumers). An unreadable record adds none.
 */
async function groupsToReconcile(jsm: JetStreamManager, region: string, also: string[]): Promise<string[]> {
  const r = await readFairShare(jsm, region);
  const configured = "record" in r && r.record ? Object.keys(r.record.groups) : [];
  return [...new Set([...configured, ...also])].sort();
}

export async function openRolloutBucket(nc: NatsConnection, region: string, replicas?: number): Promise<KV> {
  return new Kvm(nc).create(buckets.rollout(region), { history: 16, ...(replicas ? { replicas } : {}) });
}

/** The region's assignment and its KV revision, or undefined before the first solver wrote it. */
export async function readAssignment(kv: KV): Promise<{ assignment: ShardAssignment; revision: number } | undefined> {
  const e = await kv.get(SHARDS_KEY);
  if (!e || e.operation !== "PUT") return undefined;
  return { assignment: ShardAssignment.parse(e.json()), revision: e.revision };
}

/** The assignment, created with every shard for `version` when there is none (the first solver of a region). */
export async function ensureAssignment(
  kv: KV,
  version: string,
  by: string,
): Promise<{ assignment: ShardAssignment; revision: number }> {
  for (let i = 0; i < 5; i++) {
    const found = await readAssignment(kv);
    if (found) return found;
    const a = initialAssignment(version, by);
    try {
      return { assignment: a, revision: await kv.create(SHARDS_KEY, JSON.stringify(a)) };
    } catch {
      // Another solver created it first: read theirs.
    }
  }
  throw new Error(`cannot read or create the shard assignment in ${kv}`);
}

/** Stores `next` if the assignment is still at `revision` (compare-and-set); returns the new revision. */
export async function writeAssignment(kv: KV, next: ShardAssignment, revision: number): Promise<number> {
  return kv.update(SHARDS_KEY, JSON.stringify(ShardAssignment.parse(next)), revision);
}

/** A lane consumer's filters now, or undefined when it does not exist. */
async function currentFilters(
  jsm: JetStreamManager,
  region: string,
  lane: Priority,
  version: string,
  group: string | undefined,
): Promise<string[] | undefined> {
  try {
    const c = (await jsm.consumers.info(streams.tasks(region), laneConsumer(region, lane, version, group))).config;
    return c.filter_subjects?.length ? c.filter_subjects : c.filter_subject ? [c.filter_subject] : [];
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** Creates or updates a version's lane consumer to exactly `filters`. */
async function setFilters(
  jsm: JetStreamManager,
  p: { region: string; lane: Priority; version: string; group: string | undefined },
  filters: string[],
  ackWaitMs: number,
  exists: boolean,
  pauseUntil: string | undefined,
): Promise<void> {
  const { region, lane, version, group } = p;
  const { filter_subject: _f, ...cfg } = laneConsumerConfig({
    region,
    lane,
    version,
    ...(group ? { group } : {}),
    ackWaitMs,
    ...(pauseUntil ? { pauseUntil } : {}),
  });
  const want = { ...cfg, filter_subjects: filters } as Partial<ConsumerConfig> & { durable_name: string };
  // Created while its lane is paused (@pipeline/shared/lanes): created paused.
  if (!exists) await jsm.consumers.add(streams.tasks(region), want);
  // nats.js merges an update into the current config: the single filter is cleared explicitly, and
  // the pause it read is not sent back (it could undo a pause made since); the lane's, if any, is.
  else
    await jsm.consumers.update(streams.tasks(region), want.durable_name, {
      ...want,
      filter_subject: undefined,
      pause_until: pauseUntil,
    } as never);
}

const sameSet = (a: string[], b: string[]) => a.length === b.length && a.every((x) => b.includes(x));

/**
 * A consumer that gains subjects has already scanned past their older messages (it skipped them
 * while they were not its own), and the server does not rewind it when its filters change: those
 * messages would stay in the stream with no consumer to deliver them (and the sweep leaves a task
 * whose message exists alone). So it is reset (server 2.14+, ADR-60) to the oldest message the work
 * queue still holds, or to its own ack floor if lower: every message of its filters left in the
 * stream is delivered again, the ones it holds unacked too (a redelivery the claim answers `busy`).
 * Nothing is reset when it has not scanned as far as the oldest message.
 */
async function rewindToOldest(jsm: JetStreamManager, stream: string, name: string): Promise<boolean> {
  const si = await jsm.streams.info(stream);
  if (si.state.messages === 0) return false;
  const ci = await jsm.consumers.info(stream, name);
  if (ci.delivered.stream_seq < si.state.first_seq) return false;
  await jsm.consumers.reset(stream, name, Math.min(si.state.first_seq, ci.ack_floor.stream_seq + 1));
  return true;
}

/**
 * Makes the lane consumers of `versions` filter what the assignment gives them: first every
 * consumer that only loses subjects, then every one that gains some, so no two ever overlap
 * (the server would refuse). Idempotent: a rollout killed mid-move runs it again.
 */
export async function reconcileConsumers(
  jsm: JetStreamManager,
  region: string,
  a: ShardAssignment,
  versions: string[],
  ackWaitMs: number,
  alsoGroups: string[] = [],
): Promise<{ changed: string[]; rewound: string[] }> {
  const plan: {
    lane: Priority;
    version: string;
    group: string | undefined;
    want: string[];
    have: string[] | undefined;
  }[] = [];
  const groups = [undefined, ...(await groupsToReconcile(jsm, region, alsoGroups))];
  for (const version of new Set(versions))
    for (const lane of LANES)
      for (const group of groups)
        plan.push({
          lane,
          version,
          group,
          want: laneFilters(region, lane, version, ownedShards(a, version), group),
          have: await currentFilters(jsm, region, lane, version, group),
        });
  const changed: string[] = [];
  const pauses = await lanePauses(jsm, region);
  const shrinks = plan.filter(
    (p) => p.have && !sameSet(p.want, p.have) && p.want.every((w) => p.have!.includes(w) || w.includes(".idle_")),
  );
  const rest = plan.filter((p) => !shrinks.includes(p) && (!p.have || !sameSet(p.want, p.have)));
  const rewound: string[] = [];
  for (const p of [...shrinks, ...rest]) {
    await setFilters(jsm, { region, ...p }, p.want, ackWaitMs, p.have !== undefined, pauses[p.lane]);
    const name = laneConsumer(region, p.lane, p.version, p.group);
    changed.push(name);
    const gained = p.have !== undefined && p.want.some((w) => !w.includes(".idle_") && !p.have!.includes(w));
    if (gained && (await rewindToOldest(jsm, streams.tasks(region), name))) rewound.push(name);
  }
  return { changed, rewound };
}

/**
 * A solver's start (and its recovery from a lost TASKS): the assignment (created with every shard
 * for this version if the region has none), then this version's lane consumers on its own shards,
 * or on its idle subject when it owns none. Touches no other version's consumers. While a move
 * is in flight the grow may overlap the version losing the shard: retried for `retryMs`.
 */
export async function ensureVersionConsumers(
  jsm: JetStreamManager,
  kv: KV,
  o: { region: string; version: string; ackWaitMs: number; by: string; retryMs?: number },
): Promise<ShardAssignment> {
  const until = Date.now() + (o.retryMs ?? 15_000);
  for (let wait = 200; ; wait = Math.min(2000, wait * 2)) {
    const { assignment } = await ensureAssignment(kv, o.version, o.by);
    try {
      await reconcileConsumers(jsm, o.region, assignment, [o.version], o.ackWaitMs);
      return assignment;
    } catch (err) {
      if (!/filtered consumer not unique/i.test((err as Error).message)) throw err;
      if (Date.now() + wait > until)
        throw new Error(
          `solver ${o.version}: its shards (${ownedShards(assignment, o.version).join(", ") || "none"}) are still filtered by another version's lane consumers on ${streams.tasks(o.region)}; an interrupted move? run \`npm run rollout -- reconcile\` (apps/rollout)`,
        );
      await Bun.sleep(wait);
    }
  }
}

/** Versions that have lane consumers on the region's TASKS (needs the consumer-list permission: rollout, admin). */
export async function consumerVersions(jsm: JetStreamManager, region: string): Promise<string[]> {
  return (await laneConsumerNames(jsm, region)).versions;
}

/** Fair-share groups that have lane consumers on the region's TASKS (the rollout moves their shards too). */
export async function consumerGroups(jsm: JetStreamManager, region: string): Promise<string[]> {
  return (await laneConsumerNames(jsm, region)).groups;
}

async function laneConsumerNames(
  jsm: JetStreamManager,
  region: string,
): Promise<{ versions: string[]; groups: string[] }> {
  const versions = new Set<string>();
  const groups = new Set<string>();
  const prefixes = LANES.map((lane) => laneConsumer(region, lane, ""));
  for await (const c of jsm.consumers.list(streams.tasks(region))) {
    const p = prefixes.find((x) => c.name.startsWith(x));
    if (!p) continue;
    const v = versionOfConsumer(c.name.slice(p.length));
    versions.add(v.version);
    if (v.group) groups.add(v.group);
  }
  return { versions: [...versions], groups: [...groups].sort() };
}
