import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm, type KV, type KvEntry } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { z } from "zod";
import { requireStreams, type RequireOptions } from "../nats/topology.ts";
import { assertRegion } from "../subjects.ts";
import { parseSolverConfig, type SolverRuntimeConfig } from "./config.ts";

export const SOLVER_CONFIG_KEY = "solver";
/** Revisions kept per config key (the rollback horizon). */
export const CONFIG_HISTORY = 64;

export const buckets = {
  config: (region: string) => `config_${assertRegion(region).replace(/-/g, "_")}`,
  workers: (region: string) => `workers_${assertRegion(region).replace(/-/g, "_")}`,
  /** The region's lease view (written by its keeper, read by its solvers) and adoption records. */
  region: (region: string) => `region_${assertRegion(region).replace(/-/g, "_")}`,
  /** The witness's bucket of region leases (on the witness's own server). */
  leases: () => "leases",
  /** The region's shard assignment (which solver version pulls which shard: shards.ts). */
  rollout: (region: string) => `rollout_${assertRegion(region).replace(/-/g, "_")}`,
};

/**
 * An existing bucket, opened without creating it (what the apps do: their NATS users may not
 * create or change a bucket; runtime/provision.ts creates them). Reads its stream's info once
 * (STREAM.INFO), waiting up to `o.waitMs` for it, then throws a TopologyMissingError naming the
 * bucket.
 */
export async function bindBucket(nc: NatsConnection, bucket: string, o: RequireOptions = {}): Promise<KV> {
  const [info] = await requireStreams(await jetstreamManager(nc), [`KV_${bucket}`], { label: () => `KV bucket ${bucket} (stream KV_${bucket})`, ...o });
  return new Kvm(nc).open(bucket, { allow_direct: info!.config.allow_direct === true });
}

/** The region's own bucket: `lease` (LeaseView) and `adopted.<remote>` (the epoch adopted); created when missing (administering roles). */
export async function openRegionBucket(nc: NatsConnection, region: string): Promise<KV> {
  return new Kvm(nc).create(buckets.region(region), { history: 1 });
}

/** The region's config bucket (created on first use, with history: administering roles). */
export async function openConfigBucket(nc: NatsConnection, region: string): Promise<KV> {
  return new Kvm(nc).create(buckets.config(region), { history: CONFIG_HISTORY });
}

export interface ConfigRevision {
  revision: number;
  at: Date;
  operation: "PUT" | "DEL" | "PURGE";
  parsed: ReturnType<typeof parseSolverConfig>;
}

function toRevision(e: KvEntry): ConfigRevision {
  return {
    revision: e.revision,
    at: e.created,
    operation: e.operation,
    parsed: e.operation === "PUT" ? parseSolverConfig(e.value) : { ok: false, error: "(document): deleted" },
  };
}

/** Every kept revision of the solver config, oldest first. */
export async function configHistory(kv: KV): Promise<ConfigRevision[]> {
  const out: ConfigRevision[] = [];
  const it = await kv.history({ key: SOLVER_CONFIG_KEY });
  for await (const e of it) out.push(toRevision(e));
  return out.sort((a, b) => a.revision - b.revision);
}

/** The newest revision that parses, or undefined (no config stored, or none valid). */
export async function latestValidConfig(kv: KV): Promise<{ revision: number; config: SolverRuntimeConfig } | undefined> {
  const all = await configHistory(kv);
  for (let i = all.length - 1; i >= 0; i--) {
    const r = all[i]!;
    if (r.parsed.ok) return { revision: r.revision, config: r.parsed.value };
  }
  return undefined;
}

/** Stores a config after validating it; an invalid one is refused and nothing is written. */
export async function putSolverConfig(kv: KV, config: unknown): Promise<{ revision: number; config: SolverRuntimeConfig }> {
  const parsed = parseSolverConfig(JSON.stringify(config));
  if (!parsed.ok) throw new InvalidConfigError(parsed.error);
  const revision = await kv.put(SOLVER_CONFIG_KEY, JSON.stringify(parsed.value));
  return { revision, config: parsed.value };
}

export class InvalidConfigError extends Error {
  override name = "InvalidConfigError";
}

/** What each solver says about itself every few seconds (bucket entries expire, so the dead vanish). */
export const Heartbeat = z.object({
  workerId: z.string(),
  pid: z.number().int(),
  host: z.string(),
  version: z.string(),
  startedAt: z.string(),
  at: z.string(),
  inFlight: z.number().int(),
  keyName: z.string(),
  keyRef: z.string(),
  breaker: z.string(),
  configRevision: z.number().int().nullable(),
  configRejected: z.object({ revision: z.number().int(), error: z.string() }).nullable(),
  /** Provider replies since the process started (the rollout's gate compares versions by their deltas). */
  tally: z.object({ providerCalls: z.number().int().min(0), providerErrors: z.number().int().min(0) }).optional(),
});
export type Heartbeat = z.infer<typeof Heartbeat>;

export const HEARTBEAT_EVERY_MS = 2000;
/** A worker silent this long is gone; the bucket forgets its entry. */
export const HEARTBEAT_TTL_MS = 10_000;

/** The region's heartbeat bucket, created when missing (administering roles; a solver binds it: bindBucket). */
export async function openWorkersBucket(nc: NatsConnection, region: string): Promise<KV> {
  return new Kvm(nc).create(buckets.workers(region), { history: 1, ttl: HEARTBEAT_TTL_MS });
}

/** The workers whose last heartbeat is fresh (entries that do not parse are reported apart). */
export async function liveWorkers(kv: KV, now = Date.now(), freshMs = HEARTBEAT_TTL_MS): Promise<{ workers: Heartbeat[]; unreadable: string[] }> {
  const workers: Heartbeat[] = [];
  const unreadable: string[] = [];
  const keys = await kv.keys();
  for await (const k of keys) {
    const e = await kv.get(k);
    if (!e || e.operation !== "PUT") continue;
    let doc: unknown;
    try {
      doc = e.json();
    } catch {
      unreadable.push(k);
      continue;
    }
    const r = Heartbeat.safeParse(doc);
    if (!r.success) unreadable.push(k);
    else if (now - Date.parse(r.data.at) <= freshMs) workers.push(r.data);
  }
  return { workers: workers.sort((a, b) => a.workerId.localeCompare(b.workerId)), unreadable };
}
