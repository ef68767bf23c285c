import { createHash } from "node:crypto";

/** How a provider key is named in rows, events and logs: a hash prefix, never the key. */
export function keyRefOf(key: string): string {
  return `key_${createHash("sha256").update(key).digest("hex").slice(0, 12)}`;
}
