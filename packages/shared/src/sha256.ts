/**
 * sha256 of a string (UTF-8) through Bun's own hasher: the same digest as node:crypto's
 * `createHash("sha256")`, without its stream object and Buffer copies (~0.5 µs against 2-4; issue
 * 13: the gateway hashes several times per submission). What the hot paths derive from it (a
 * task's shard, the id of an Idempotency-Key, a request hash, an API key's digest) is stored or
 * compared across versions, so the bytes must never change: the callers' tests pin values that
 * node:crypto computed.
 */
export function sha256(s: string): Uint8Array;
export function sha256(s: string, encoding: "hex"): string;
export function sha256(s: string, encoding?: "hex"): Uint8Array | string {
  return encoding ? Bun.SHA256.hash(s, encoding) : (Bun.SHA256.hash(s) as Uint8Array);
}
