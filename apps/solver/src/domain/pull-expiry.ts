// How long a solver's pull requests for tasks live at the nats-server. A solver cut off from the
// network (alive, its connections stalled, nothing closed) leaves its last pull behind at the
// server until that expires, and JetStream delivers to it whatever arrives meanwhile: a task the
// reaper has just queued again for the peers would go to the silent solver and wait out a whole
// AckWait (30 s) there (tests/silent-solver.test.ts). The reaper queues a dead solver's tasks again
// no sooner than DEAD_AFTER_MS after its last heartbeat, which is at most one beat before the cut:
// a pull sent before the cut must have expired by then, with a margin.

/** Today's pull life when the reaper is off (DEAD_AFTER_MS 0), and the most a pull ever lives. */
export const PULL_EXPIRES_MAX_MS = 5000;
/** The least the NATS client accepts. */
export const PULL_EXPIRES_MIN_MS = 1000;

/** DEAD_AFTER_MS less one heartbeat interval less `marginMs`, within [1 s, 5 s]. */
export function pullExpiresMs(deadAfterMs: number, heartbeatEveryMs: number, marginMs = 1000): number {
  if (deadAfterMs <= 0) return PULL_EXPIRES_MAX_MS;
  return Math.max(PULL_EXPIRES_MIN_MS, Math.min(PULL_EXPIRES_MAX_MS, deadAfterMs - heartbeatEveryMs - marginMs));
}
