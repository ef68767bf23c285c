// What records its own incident, directly: the lease keeper's adoption (a failover, with the tasks
// it adopted), the drill runner (its receipt) and `recovery restore`. Each is best effort: an
// incident that cannot be written is logged by the caller, never fails the recovery itself.
import postgres from "postgres";
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

/**
 * `recovery restore` done: an audit row (`restore`) and the restore's incident, written into the
 * database just restored (the one the apps are pointed at next). The target's own schema must have
 * the incidents table (a snapshot taken before migration 0015 has none): an error is returned, not thrown.
 */
export async function recordRestoreInto(intoUrl: string, r: RestoreSighting): Promise<string | undefined> {
  const sql = postgres(intoUrl, { max: 1, onnotice: () => {} });
  try {
    const detail = {
      snapshot: r.snapshot,
      into: r.into,
      restoreMs: r.restoreMs,
      totalMs: r.totalMs,
      replayedEvents: r.replayedEvents,
    };
    await sql`insert into audit_log (actor, action, detail) values (${r.actor}, 'restore', ${sql.json(detail)})`;
    await recordRestore(sql, r);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  } finally {
    await sql.end({ timeout: 5 });
  }
}
