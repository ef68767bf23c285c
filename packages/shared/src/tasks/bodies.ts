// Image bodies out of EVENTS (docs/security.md, "Image bodies"): the gateway publishes a task's
// bodies on BODIES (`bodies.<region>.<task id>`) and its `accepted` event carries the other params
// plus a reference to each body (its sha256 and size), so that a reader of EVENTS never sees a
// screenshot and a restore or replica can fetch the body and check it is the one accepted.
import { createHash } from "node:crypto";
import { z } from "zod";

/** The params that are bodies, by task type (only `image` has one today). */
const BODY_FIELDS: Record<string, readonly string[]> = { image: ["body"] };

/** The reference an `accepted` event carries instead of a body. */
export const BodyRef = z.object({
  field: z.string().min(1).max(64),
  /** sha256 (hex) of the value as the client sent it (the base64 text). */
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  /** Length of that value in bytes. */
  size: z.number().int().min(0),
});
export type BodyRef = z.infer<typeof BodyRef>;
export const BodyRefs = z.array(BodyRef).max(8);

/** What BODIES holds for one task: the removed params, by name. */
export const BodyMessage = z.object({ taskId: z.string(), bodies: z.record(z.string(), z.string()) });
export type BodyMessage = z.infer<typeof BodyMessage>;

export const bodyDigest = (value: string) => createHash("sha256").update(value, "utf8").digest("hex");

export interface SplitBodies {
  /** The params without their bodies: what EVENTS carries. */
  params: Record<string, unknown>;
  /** One reference per removed body (empty when the type has none). */
  refs: BodyRef[];
  /** The removed bodies, by param name: what BODIES carries. */
  values: Record<string, string>;
}

/** Takes the bodies out of a task's params. */
export function splitBodies(type: string, params: Record<string, unknown>): SplitBodies {
  const rest: Record<string, unknown> = { ...params };
  const refs: BodyRef[] = [];
  const values: Record<string, string> = {};
  for (const field of BODY_FIELDS[type] ?? []) {
    const v = rest[field];
    if (typeof v !== "string") continue;
    delete rest[field];
    values[field] = v;
    refs.push({ field, sha256: bodyDigest(v), size: Buffer.byteLength(v, "utf8") });
  }
  return { params: rest, refs, values };
}

/**
 * The bodies of a BODIES message checked against an event's references: every referenced body
 * present with the same sha256 and size. Returns the bodies, or why they cannot be used.
 */
export function checkBodies(
  refs: BodyRef[],
  message: unknown,
): { ok: true; values: Record<string, string> } | { ok: false; reason: string } {
  const m = BodyMessage.safeParse(message);
  if (!m.success) return { ok: false, reason: "the BODIES message is not a body message" };
  const values: Record<string, string> = {};
  for (const ref of refs) {
    const v = m.data.bodies[ref.field];
    if (v === undefined) return { ok: false, reason: `the BODIES message has no ${ref.field}` };
    if (Buffer.byteLength(v, "utf8") !== ref.size || bodyDigest(v) !== ref.sha256)
      return { ok: false, reason: `${ref.field} does not match the sha256 the accepted event names` };
    values[ref.field] = v;
  }
  return { ok: true, values };
}
