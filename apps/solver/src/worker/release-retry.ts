/**
 * A row released after a handler error, through a database outage.
 *
 * A handler that fails (most often: the database went away under its completion or checkpoint
 * write) leaves its row to the next worker by releasing it (`solving -> retrying`). If that
 * release fails too, the row stays leased to this worker until the lease runs out (30 s by
 * default), and a redelivery to another solver waits that out (it finds the lease held). So a
 * release that failed because the connection did is tried again, backing off from `firstMs` to
 * `maxMs`, until it goes through, the lease would have run out anyway (`forMs`), the error is not
 * a connection error, or the worker is shutting down; the caller applies the message's outcome
 * after, so the redelivery finds the row free. Measured by `tests/restarts.test.ts` (Postgres
 * restarted under load with the default lease: tasks finished ~28 s after the restart before,
 * within seconds after).
 */
export interface ReleaseRetry {
  release: () => Promise<unknown>;
  /** Errors worth another try (the connection's, not the statement's). */
  transient: (err: unknown) => boolean;
  /** How long to keep trying: past the lease, the row is free without us. */
  forMs: number;
  /** The worker is shutting down: stop at once. */
  aborted: () => boolean;
  firstMs?: number;
  maxMs?: number;
  sleep?: (ms: number) => Promise<void>;
  now?: () => number;
}

export type ReleaseEnd = "released" | "gave_up" | "failed";

export async function releaseWithRetry(o: ReleaseRetry): Promise<ReleaseEnd> {
  const now = o.now ?? (() => performance.now());
  const sleep = o.sleep ?? ((ms: number) => Bun.sleep(ms));
  const until = now() + o.forMs;
  let delay = o.firstMs ?? 100;
  for (;;) {
    try {
      await o.release();
      return "released";
    } catch (err) {
      if (!o.transient(err)) return "failed";
    }
    if (o.aborted() || now() + delay >= until) return "gave_up";
    await sleep(delay);
    if (o.aborted()) return "gave_up";
    delay = Math.min(delay * 2, o.maxMs ?? 1000);
  }
}
