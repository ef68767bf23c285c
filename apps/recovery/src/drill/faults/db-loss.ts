// db-loss: drop the database, restore the snapshot taken in prepare(), replay EVENTS, recover-stale.
import { adminStatement, databaseName, renameDatabase, withDatabase } from "../../adapters/pg-tools.ts";
import { restoreSnapshot } from "../../snapshot/restore.ts";
import { takeSnapshot } from "../../snapshot/take-snapshot.ts";
import { recoverStale } from "../../sweep/recover-stale.ts";
import type { Fault, FaultDeps } from "./fault.ts";

/** Takes a snapshot first; the drop, restore and replay come back under the database's own name. */
export function dbLoss(d: FaultDeps): Fault {
  let snapshot: Awaited<ReturnType<typeof takeSnapshot>> | undefined;
  return {
    async prepare() {
      snapshot = await takeSnapshot({
        databaseUrl: d.databaseUrl,
        dir: d.snapshotDir,
        keep: d.snapshotKeep,
        region: d.ctx.region,
        jsm: d.ctx.jsm,
      });
      d.step(
        `snapshot ${snapshot.manifest.name} taken (EVENTS seq ${snapshot.manifest.events.lastSeq}); tasks accepted after it come back from EVENTS`,
      );
    },
    async inject() {
      const name = databaseName(d.databaseUrl);
      const admin = withDatabase(d.databaseUrl, "postgres");
      await adminStatement(admin, "drop", name);
      d.step(`database ${name} dropped`);
      // Restore into a new database; the apps see it under their name only once the replay
      // is complete (a solver must never read a half-replayed row).
      const scratch = `${name}_restoring`;
      await adminStatement(admin, "drop", scratch);
      await adminStatement(admin, "create", scratch);
      const r = await restoreSnapshot({
        snapshot: snapshot!,
        intoUrl: withDatabase(d.databaseUrl, scratch),
        nats: { js: d.ctx.js, jsm: d.ctx.jsm },
      });
      await renameDatabase(admin, scratch, name);
      d.step(`restore ${r.restoreMs} ms + replay of ${r.replay?.events ?? 0} events; renamed to ${name}`);
      const sweep = await recoverStale(d.ctx, { staleAfterMs: 5000 });
      d.step(`recover-stale: ${sweep.republished} re-published`);
      return {
        snapshot: r.snapshot,
        restoreMs: r.restoreMs,
        replayedEvents: r.replay?.events ?? 0,
        republished: sweep.republished,
      };
    },
  };
}
