import { createHash } from "node:crypto";

function uuidFromBytes(b: Buffer, version: number): string {
  const h = Buffer.from(b.subarray(0, 16));
  h[6] = (h[6]! & 0x0f) | (version << 4);
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.toString("hex");
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/**
 * The task id: derived from (client, Idempotency-Key) when a key is given, so a retried request
 * lands on the same id (and the same Nats-Msg-Id); a time-ordered v7 UUID otherwise.
 */
export function deriveTaskId(clientId: string, idempotencyKey: string | undefined): string {
  if (idempotencyKey === undefined) return Bun.randomUUIDv7();
  return uuidFromBytes(createHash("sha256").update(`${clientId}\u0000${idempotencyKey}`).digest(), 8);
}

/** JSON with object keys sorted, so equal bodies hash equal whatever their key order. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`;
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v);
}

/** Hash of the parsed request: two requests with one Idempotency-Key must hash equal. */
export function requestHash(parsed: unknown): string {
  return createHash("sha256").update(canonicalJson(parsed)).digest("hex");
}

/** Idempotency-Key header: 1-255 visible ASCII characters. */
export function validIdempotencyKey(k: string): boolean {
  return /^[\x21-\x7e]{1,255}$/.test(k);
}
