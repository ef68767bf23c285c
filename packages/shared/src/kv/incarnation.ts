// A solver's identity: a stable name (WORKER_ID, or host-pid) and an incarnation per process
// start. What a process holds (task leases, submit markers, provider slot blocks, its heartbeat
// entry, its Postgres sessions' application_name) is held under `<name>.<incarnation>`, so a
// process started again under the same name is a different holder: it never mistakes its
// predecessor's claims for its own, and the predecessor's silence is seen (the reaper takes its
// claims over; apps/solver/src/adapters/reaper.ts). Dashboards group by the name.
import { randomInt } from "node:crypto";

/** `i` + the start time in base 36 + two random base-36 digits: sortable by start, unique per start. */
export function newIncarnation(now = Date.now()): string {
  return `i${now.toString(36)}${randomInt(36 * 36)
    .toString(36)
    .padStart(2, "0")}`;
}

const SUFFIX = /\.i[0-9a-z]{8,}$/;

/** The id a process holds its claims under. */
export function incarnationId(name: string, incarnation: string): string {
  return `${name}.${incarnation}`;
}

/** The stable name of a holder (`solver-1.i1a2b3c4d5e` -> `solver-1`); an id without an incarnation is its own name. */
export function workerNameOf(id: string): string {
  return id.replace(SUFFIX, "");
}
