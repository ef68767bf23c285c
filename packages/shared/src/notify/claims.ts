// "At most once per event" across processes and restarts: before a notification is sent, its key
// is created in the region's `notify_<region>` KV bucket; only the process whose create succeeded
// sends. Two recovery services seeing the same failover, or a rollout service restarted between
// its decision and its send, make one message. Entries expire after `maxAgeMs` (7 days).
import { type KV, Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { sha256 } from "../sha256.ts";
import { buckets } from "../subjects.ts";
import { dedupeKey } from "./message.ts";

export interface NotifyClaims {
  /** True for the first claim of `key` (this process sends), false when someone claimed it before. */
  claim(key: string): Promise<boolean>;
}

export const NOTIFY_KEEP_MS = 7 * 24 * 3600_000;

/** The claims of `kv` (the bucket must exist: openNotifyBucket). */
export function kvClaims(kv: KV): NotifyClaims {
  return {
    async claim(key) {
      try {
        await kv.create(
          dedupeKey(key, (s) => sha256(s, "hex")),
          JSON.stringify({ at: new Date().toISOString() }),
        );
        return true;
      } catch (err) {
        if (/wrong last sequence|key exists/i.test((err as Error).message)) return false;
        throw err;
      }
    },
  };
}

/**
 * The region's claims bucket, created when missing (the recovery and rollout services administer
 * KV; provision.ts creates it with the region's `replicas`).
 */
export async function openNotifyBucket(
  nc: NatsConnection,
  region: string,
  maxAgeMs = NOTIFY_KEEP_MS,
  replicas?: number,
): Promise<KV> {
  return new Kvm(nc).create(buckets.notify(region), { history: 1, ttl: maxAgeMs, ...(replicas ? { replicas } : {}) });
}
