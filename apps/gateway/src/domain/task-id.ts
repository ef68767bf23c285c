import { sha256 } from "@pipeline/shared/sha256";

// Both hashes are stored or derived (the id of a retried request, a row's request_hash): their
// bytes must never change (task-id.test.ts pins them).

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

/** The first 16 bytes of a digest as a UUID of `version` (RFC 9562 variant bits). */
function uuidFromBytes(b: Uint8Array, version: number): string {
  const h = (i: number) => HEX[b[i]!]!;
  const v = HEX[(b[6]! & 0x0f) | (version << 4)]!;
  const r = HEX[(b[8]! & 0x3f) | 0x80]!;
  return `${h(0)}${h(1)}${h(2)}${h(3)}-${h(4)}${h(5)}-${v}${h(7)}-${r}${h(9)}-${h(10)}${h(11)}${h(12)}${h(13)}${h(14)}${h(15)}`;
}

/**
 * The task id: derived from (client, Idempotency-Key) when a key is given, so a retried request
 * lands on the same id (and the same Nats-Msg-Id); a time-ordered v7 UUID otherwise.
 */
export function deriveTaskId(clientId: string, idempotencyKey: string | undefined): string {
  if (idempotencyKey === undefined) return Bun.randomUUIDv7();
  return uuidFromBytes(sha256(`${clientId}\u0000${idempotencyKey}`), 8);
}

/** JSON with object keys sorted, so equal bodies hash equal whatever their key order (undefined members left out, as JSON.stringify does). */
export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) {
    let out = "[";
    for (let i = 0; i < v.length; i++) {
      if (i > 0) out += ",";
      out += canonicalJson(v[i]) ?? "";
    }
    return `${out}]`;
  }
  const o = v as Record<string, unknown>;
  let out = "{";
  for (const k of Object.keys(o).sort()) {
    const x = o[k];
    if (x === undefined) continue;
    if (out.length > 1) out += ",";
    out += `${JSON.stringify(k)}:${canonicalJson(x)}`;
  }
  return `${out}}`;
}

/** Hash of the parsed request: two requests with one Idempotency-Key must hash equal. */
export function requestHash(parsed: unknown): string {
  return sha256(canonicalJson(parsed), "hex");
}

/** Idempotency-Key header: 1-255 visible ASCII characters. */
export function validIdempotencyKey(k: string): boolean {
  return /^[\x21-\x7e]{1,255}$/.test(k);
}
