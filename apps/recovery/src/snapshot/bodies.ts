// Image bodies for the replay and the replica (docs/security.md, "Image bodies"): an `accepted`
// event names its task's bodies (sha256 and size) and BODIES_<REGION> holds them, one message per
// task on `bodies.<region>.<task id>`, for BODIES_MAX_AGE_MS. Read here by task id, from this
// region's stream or from the other region's mirror of it, and checked against the event.
import type { JetStreamManager } from "@nats-io/jetstream";
import { bodySubject, streams } from "@pipeline/shared/subjects";
import { type BodyRef, checkBodies } from "@pipeline/shared/tasks";

/** A task's bodies, or why they cannot be had. */
export type BodyLookup =
  | { ok: true; values: Record<string, string> }
  | {
      ok: false;
      reason: string /** BODIES itself could not be read (missing stream, NATS error): not a verdict on the body. */;
      unreadable?: true;
    };

/** Looks a task's bodies up: `region` is the task's home region (whose BODIES, or mirror of it, `jsm` reaches). */
export type BodySource = (region: string, taskId: string, refs: BodyRef[]) => Promise<BodyLookup>;

/** The error code of a task rebuilt without its body: failed, never solved without it. */
export const BODY_UNAVAILABLE = "BODY_UNAVAILABLE";

/** Reads bodies through `jsm`: this region's BODIES, or (another domain's `jsm`, or a local mirror) the copy of it. */
export function bodySource(jsm: JetStreamManager): BodySource {
  return async (region, taskId, refs) => {
    const stream = streams.bodies(region);
    let m: Awaited<ReturnType<JetStreamManager["streams"]["getMessage"]>>;
    try {
      m = await jsm.streams.getMessage(stream, { last_by_subj: bodySubject(region, taskId) });
    } catch (err) {
      return { ok: false, reason: `${stream} could not be read: ${(err as Error).message}`, unreadable: true };
    }
    if (!m) return { ok: false, reason: `not in ${stream} (older than its retention, BODIES_MAX_AGE_MS)` };
    let body: unknown;
    try {
      body = m.json();
    } catch {
      return { ok: false, reason: `the ${stream} message is not JSON` };
    }
    const r = checkBodies(refs, body);
    return r.ok ? r : { ok: false, reason: `${stream}: ${r.reason}` };
  };
}

/** Raised by the replay when BODIES cannot be read at all: it stops rather than fail every image task after the snapshot. */
export class BodiesUnreadableError extends Error {
  override name = "BodiesUnreadableError";
}

/** The replay's source: an unreadable BODIES stops it (BodiesUnreadableError); a body that is gone is a verdict. */
export function strictBodySource(inner: BodySource): BodySource {
  return async (region, taskId, refs) => {
    const r = await inner(region, taskId, refs);
    if (!r.ok && r.unreadable)
      throw new BodiesUnreadableError(
        `${r.reason}: the replay stopped rather than fail image tasks for it (the target holds a partial replay: recreate it empty, then restore again, with --events-from the region that holds this region's BODIES if this one's NATS is gone)`,
      );
    return r;
  };
}
