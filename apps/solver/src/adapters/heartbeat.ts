import type { KV } from "@nats-io/kv";
import { HEARTBEAT_EVERY_MS, type Heartbeat } from "@pipeline/shared/kv";
import type { Logger } from "@pipeline/shared/log";

/** Puts this worker's heartbeat in the region's workers bucket every few seconds; removes it on stop. */
export function startHeartbeat(
  kv: KV,
  beat: () => Omit<Heartbeat, "at">,
  log: Logger,
  everyMs = HEARTBEAT_EVERY_MS,
): { stop(): Promise<void> } {
  let failing = false;
  const put = () => {
    const b = beat();
    return kv
      .put(b.workerId, JSON.stringify({ ...b, at: new Date().toISOString() }))
      .then(() => (failing = false))
      .catch((err: Error) => {
        if (!failing) log.warn({ err: err.message }, "heartbeat not written");
        failing = true;
      });
  };
  void put();
  const timer = setInterval(put, everyMs);
  return {
    async stop() {
      clearInterval(timer);
      await kv.delete(beat().workerId).catch(() => {});
    },
  };
}
