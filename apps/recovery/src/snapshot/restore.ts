import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import { applyAppRoles } from "@pipeline/shared/db";
import postgres from "postgres";
import { describeUrl, pgRestore, userRelations } from "../adapters/pg-tools.ts";
import { checkIntegrity, type Snapshot } from "./manifest.ts";
import { type ReplayReport, replayEvents } from "./replay.ts";

/** Raised when the target database is not empty: restore never merges into live data. */
export class TargetNotEmptyError extends Error {
  override name = "TargetNotEmptyError";
}

export interface RestoreReport {
  snapshot: string;
  into: string;
  restoreMs: number;
  replay: ReplayReport | null;
  tasks: Record<string, number>;
  totalMs: number;
}

export interface RestoreOptions {
  snapshot: Snapshot;
  intoUrl: string;
  /** EVENTS to replay from; without it, only the dump is restored. */
  nats?: {
    js: JetStreamClient;
    jsm: JetStreamManager /** js/jsm reach a mirror of EVENTS in another domain (see replayEvents). */;
    mirror?: boolean;
  };
  allowGap?: boolean;
}

/**
 * Restores a snapshot into an EMPTY database (refuses otherwise, TargetNotEmptyError), after
 * checking its checksum, then replays EVENTS after the snapshot's sequence so every change
 * acknowledged after the snapshot is back. The app roles' grants are applied to it as migrate
 * applies them (run it as the owner). Point the apps at the database only once this
 * returns: a solver reading a half-replayed row could submit a finished task again.
 */
export async function restoreSnapshot(o: RestoreOptions): Promise<RestoreReport> {
  const started = Date.now();
  const m = o.snapshot.manifest;
  await checkIntegrity(o.snapshot);
  const existing = await userRelations(o.intoUrl);
  if (existing > 0)
    throw new TargetNotEmptyError(
      `${describeUrl(o.intoUrl)} is not empty (${existing} relations); restore only into an empty database`,
    );
  await pgRestore(o.snapshot.dumpPath, o.intoUrl);
  const restoreMs = Date.now() - started;
  const sql = postgres(o.intoUrl, { max: 2, onnotice: () => {} });
  try {
    // The dump carries no privileges (--no-privileges): each app role's grants are set again, as
    // `recovery migrate` sets them, so the apps can use the database once they are pointed at it.
    await applyAppRoles(sql);
    const replay = o.nats
      ? await replayEvents({
          sql,
          js: o.nats.js,
          jsm: o.nats.jsm,
          region: m.region,
          afterSeq: m.events.lastSeq,
          streamCreated: m.events.streamCreated,
          ...(o.allowGap ? { allowGap: true } : {}),
          ...(o.nats.mirror ? { mirror: true } : {}),
        })
      : null;
    const rows = await sql<
      { state: string; n: number }[]
    >`select state, count(*)::int as n from tasks group by state order by state`;
    return {
      snapshot: m.name,
      into: describeUrl(o.intoUrl),
      restoreMs,
      replay,
      tasks: Object.fromEntries(rows.map((r) => [r.state, r.n])),
      totalMs: Date.now() - started,
    };
  } finally {
    await sql.end({ timeout: 5 });
  }
}
