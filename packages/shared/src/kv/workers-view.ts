// The workers bucket as one process sees it, kept by a single watch instead of listed again each
// round. Listing (`kv.keys()`, liveWorkers) opens an ordered consumer on the server per call, and
// the server keeps each until its inactivity threshold: a reaper asking every 2 s per solver left
// hundreds of idle consumers on the server and grew nats-server's memory through a soak. The view
// opens one consumer for the life of the process.
//
// A copy can be stale (the watch stalled, the connection cut): a stale copy would show live peers
// as silent and get them declared dead. So the view refuses to answer when this worker's own
// heartbeat, written every 2 s and read back through the same watch, is older than `staleAfterMs`:
// seeing one's own latest beat proves every entry written before it has been seen too (the watch
// delivers in stream order).
import type { KV } from "@nats-io/kv";
import { HEARTBEAT_TTL_MS, Heartbeat, type Heartbeat as HeartbeatDoc } from "./heartbeats.ts";

export class StaleViewError extends Error {
  constructor(ageMs: number | undefined) {
    super(
      ageMs === undefined
        ? "the workers view has not seen this worker's own heartbeat yet"
        : `the workers view is stale: this worker's own heartbeat was seen ${ageMs} ms ago`,
    );
    this.name = "StaleViewError";
  }
}

export interface WorkersView {
  /** The workers whose last heartbeat is at most `freshMs` old; throws StaleViewError on a stale copy. */
  live(now?: number, freshMs?: number): { workers: HeartbeatDoc[]; unreadable: string[] };
  /** Ends the watch (its consumer goes with it). */
  stop(): void;
}

/** One watch on the bucket for the life of the process; `self` is this worker's heartbeat key. */
export async function watchWorkers(kv: KV, o: { self: string; staleAfterMs: number }): Promise<WorkersView> {
  const entries = new Map<string, HeartbeatDoc | "unreadable">();
  const iter = await kv.watch({ key: ">" });
  void (async () => {
    for await (const e of iter) {
      if (e.operation !== "PUT") {
        entries.delete(e.key);
        continue;
      }
      let doc: unknown;
      try {
        doc = e.json();
      } catch {
        entries.set(e.key, "unreadable");
        continue;
      }
      const r = Heartbeat.safeParse(doc);
      entries.set(e.key, r.success ? r.data : "unreadable");
    }
  })().catch(() => {});
  return {
    live(now = Date.now(), freshMs = HEARTBEAT_TTL_MS) {
      const own = entries.get(o.self);
      const ownAge = own && own !== "unreadable" ? now - Date.parse(own.at) : undefined;
      if (ownAge === undefined || ownAge > o.staleAfterMs) throw new StaleViewError(ownAge);
      const workers: HeartbeatDoc[] = [];
      const unreadable: string[] = [];
      for (const [key, doc] of entries) {
        if (doc === "unreadable") unreadable.push(key);
        else if (now - Date.parse(doc.at) > HEARTBEAT_TTL_MS)
          entries.delete(key); // expired in the bucket too
        else if (now - Date.parse(doc.at) <= freshMs) workers.push(doc);
      }
      return { workers: workers.sort((a, b) => a.workerId.localeCompare(b.workerId)), unreadable };
    },
    stop: () => iter.stop(),
  };
}
