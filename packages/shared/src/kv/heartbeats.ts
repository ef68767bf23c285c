// Solvers' heartbeats in the region's workers bucket: what each says about itself, and who is alive.
import { type KV, Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { z } from "zod";
import { buckets } from "../subjects.ts";

/** What each solver says about itself every few seconds (bucket entries expire, so the dead vanish). */
export const Heartbeat = z.object({
  /** What it holds its claims under: `<name>.<incarnation>` (kv/incarnation.ts). */
  workerId: z.string(),
  /** Its stable name (WORKER_ID, or host-pid); absent from solvers before incarnations. */
  name: z.string().optional(),
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
  /** ADAPTIVE_CONCURRENCY=1: per account (key reference), the adaptive limit, its plan and the places held now. */
  concurrencyLimits: z
    .record(
      z.string(),
      z.object({ limit: z.number().int().min(0), plan: z.number().int().min(0), held: z.number().int().min(0) }),
    )
    .optional(),
});
export type Heartbeat = z.infer<typeof Heartbeat>;

export const HEARTBEAT_EVERY_MS = 2000;
/** A worker silent this long is gone; the bucket forgets its entry. */
export const HEARTBEAT_TTL_MS = 10_000;

/** The region's heartbeat bucket, created when missing (administering roles; a solver binds it: bindBucket). */
export async function openWorkersBucket(nc: NatsConnection, region: string, replicas?: number): Promise<KV> {
  return new Kvm(nc).create(buckets.workers(region), {
    history: 1,
    ttl: HEARTBEAT_TTL_MS,
    ...(replicas ? { replicas } : {}),
  });
}

/** The workers whose last heartbeat is fresh (entries that do not parse are reported apart). */
export async function liveWorkers(
  kv: KV,
  now = Date.now(),
  freshMs = HEARTBEAT_TTL_MS,
): Promise<{ workers: Heartbeat[]; unreadable: string[] }> {
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
