// What records its own incident, directly: the lease keeper's adoption (a failover, with the tasks
// it adopted), the drill runner (its receipt) and `recovery restore`. Each is best effort: an
// incident that cannot be written is logged by the caller, never fails the recovery itself.
import type postgres from "postgres";
import { type DrillReceipt, drillObservation, type RestoreSighting, restoreObservation } from "./drill.ts";
import { type FailoverSighting, failoverObservation } from "./failover.ts";
import { type Recorded, recordIncident, setTasksAffected } from "./store.ts";

/** A takeover's adoption phase done: the failover incident (opened at the first phase), its tasks summed over both phases. */
export async function recordAdoption(sql: postgres.Sql, s: FailoverSighting): Promise<Recorded> {
  const r = await recordIncident(sql, failoverObservation(s));
  const d = r.incident.detail;
  const tasks = Number(d.adopted_resumable ?? 0) + Number(d.adopted_all ?? 0);
  await setTasksAffected(sql, r.incident.key, tasks);
  return { ...r, incident: { ...r.incident, tasksAffected: tasks } };
}

export const recordDrill = (sql: postgres.Sql, d: DrillReceipt) => recordIncident(sql, drillObservation(d));

export const recordRestore = (sql: postgres.Sql, r: RestoreSighting) => recordIncident(sql, restoreObservation(r));
