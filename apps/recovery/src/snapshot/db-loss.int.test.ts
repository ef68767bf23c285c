// Database loss drill: a snapshot is taken mid-run under a steady load, the database is then
// dropped, restored from the snapshot into a new database and EVENTS replayed after the
// snapshot's sequence. Every task acknowledged before the drop is back with its latest state
// (RPO = 0); the ones completed after the snapshot are completed, with the same token.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import {
  api,
  completedEventsCarryToken,
  type E2eStack as Stack,
  startE2eStack as startStack,
  steadyLoad,
} from "@pipeline/devstack/stack";
import { eventually } from "@pipeline/devstack/testing";
import { createLogger } from "@pipeline/shared/log";
import { connectNats } from "@pipeline/shared/nats";
import type { TaskView } from "@pipeline/shared/schemas";
import postgres from "postgres";
import { adminStatement, withDatabase } from "../adapters/pg-tools.ts";
import type { RecoveryContext } from "../context.ts";
import { recoverStale } from "../sweep/recover-stale.ts";
import { resolveSnapshot } from "./manifest.ts";
import { restoreSnapshot, TargetNotEmptyError } from "./restore.ts";
import { takeSnapshot } from "./take-snapshot.ts";
import { verifySnapshot } from "./verify.ts";

const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

test("snapshot mid-run, database dropped, restore + EVENTS replay: every acknowledged task is back with its latest state", async () => {
  const region = "rdbloss";
  const s = await startStack({ region, solvers: 2, emulator: { latencyMs: 300 } });
  cleanups.push(() => s.stop());
  const nc = await connectNats(s.nats.url, "recovery-test", s.nats.auth("admin"));
  cleanups.push(() => nc.close());
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  const snapDir = mkdtempSync(join(tmpdir(), "recovery-snapshots-"));
  cleanups.push(async () => rmSync(snapDir, { recursive: true, force: true }));
  const adminUrl = withDatabase(s.tdb.url, "postgres");

  // ~30 submissions/s for ~10 s: the snapshot (at 2 s) and the loss (at ~5 s) fall inside the
  // load, so tasks are being claimed, submitted and completed as the database goes.
  const load = steadyLoad(s, "db", 300, 8, 250);
  await Bun.sleep(2000);
  const snap = await takeSnapshot({ databaseUrl: s.tdb.url, dir: snapDir, keep: 3, region, jsm });
  const snapAt = Date.parse(snap.manifest.createdAt);
  // A dump holds every token: the folder and every file are the owner's alone.
  expect(statSync(snapDir).mode & 0o777).toBe(0o700);
  for (const f of [snap.dumpPath, snap.manifestPath]) expect(statSync(f).mode & 0o777).toBe(0o600);
  // A manifest that points its dump outside the folder is not a snapshot.
  const forged = join(snapDir, "snap-forged.json");
  writeFileSync(forged, JSON.stringify({ ...snap.manifest, name: "snap-forged", dumpFile: "../../etc/passwd" }));
  expect(() => resolveSnapshot(snapDir, "snap-forged")).toThrow();
  rmSync(forged);
  const verified = await verifySnapshot(snap, s.tdb.url);
  expect(verified.tables["public.tasks"]).toBeGreaterThan(0);
  // Restore never merges into live data.
  await expect(restoreSnapshot({ snapshot: snap, intoUrl: s.tdb.url })).rejects.toBeInstanceOf(TargetNotEmptyError);
  await Bun.sleep(2500);

  // What the gateway answered just before the loss.
  const ackedBefore = load.acked.map((a) => a.id);
  const answered = new Map(
    (await Promise.all(ackedBefore.map((id) => api<TaskView>(s, `/v1/tasks/${id}`)))).map((v) => [v.body.id, v.body]),
  );
  const fault = Date.now();
  // The database is lost; the cluster's roles (the apps' logins) are not.
  await adminStatement(adminUrl, "drop", s.tdb.name);

  // Restore into a new database; the apps get it under their database's name only once the
  // replay is done (a solver must never read a half-replayed row).
  const restoredName = `${s.tdb.name}_restored`;
  await adminStatement(adminUrl, "create", restoredName);
  const restoredUrl = withDatabase(s.tdb.url, restoredName);
  const report = await restoreSnapshot({ snapshot: snap, intoUrl: restoredUrl, nats: { js, jsm } });
  const check = postgres(restoredUrl, { max: 1, onnotice: () => {} });
  const rows = new Map(
    (
      await check<
        { id: string; state: string; token: string | null }[]
      >`select id, state, token from tasks where id = any(${ackedBefore}::uuid[])`
    ).map((r) => [r.id, r]),
  );
  await check.end({ timeout: 5 });
  const missing = ackedBefore.filter((id) => !rows.has(id));
  const completedBefore = [...answered.values()].filter((v) => v.status === "completed");
  const completedAfterSnapshot = completedBefore.filter((v) => v.completedAt && Date.parse(v.completedAt) > snapAt);
  // Once the solvers keep tokens out of EVENTS (issue 16.3: `tokenStored`), a task completed after
  // the snapshot comes back completed without its token (clients see expired, TOKEN_UNAVAILABLE).
  const tokensInEvents = await completedEventsCarryToken(jsm, region);
  const wrong = completedBefore.filter((v) => {
    const r = rows.get(v.id);
    if (r?.state !== "completed") return true;
    if (r.token === v.result?.token) return false;
    return tokensInEvents || r.token !== null || !completedAfterSnapshot.includes(v);
  });
  const acceptedAfterSnapshot = ackedBefore.filter((id) => (load.acked.find((a) => a.id === id)?.at ?? 0) > snapAt);

  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`alter database "${restoredName}" rename to "${s.tdb.name}"`);
  await admin.end({ timeout: 5 });
  const backAt = Date.now();
  // The runbook's last step: re-publish what no message will deliver (normally nothing).
  const ctx: RecoveryContext = {
    region,
    nc,
    js,
    jsm,
    database: s.db,
    log: createLogger("recovery", { level: "silent" }),
    publishDeadlineMs: 10_000,
  };
  const sweep = await eventually(() => recoverStale(ctx, { staleAfterMs: 5000 }), 20_000, 250);

  // Tasks complete again after the restore (or, on a slow machine where the load had finished
  // before the loss, nothing is left unfinished).
  await eventually(
    async () => {
      const [r] = await s.db.sql<
        { after: number; open: number }[]
      >`select count(*) filter (where completed_at > ${new Date(backAt).toISOString()}::timestamptz)::int as after, count(*) filter (where state not in ('completed', 'failed', 'cancelled'))::int as open from tasks`;
      return r!.after > 0 || (r!.open === 0 && load.acked.length >= 300);
    },
    60_000,
    100,
  );
  const firstCompletionMs = Date.now() - fault;
  await load.done;
  const ids = load.acked.map((a) => a.id);
  await eventually(
    async () => {
      const [r] = await s.db.sql<
        { n: number }[]
      >`select count(*)::int as n from tasks where id = any(${ids}::uuid[]) and state = 'completed'`;
      return r?.n === ids.length;
    },
    90_000,
    250,
  );
  const allDoneMs = Date.now() - fault;
  const stats = s.emu.stats();
  console.log(
    `[recovery-db-loss] snapshot ${snap.manifest.bytes} B in ${snap.manifest.tookMs} ms (EVENTS seq ${snap.manifest.events.lastSeq}); database dropped with ${ackedBefore.length} acknowledged tasks ` +
      `(${acceptedAfterSnapshot.length} accepted and ${completedAfterSnapshot.length} completed after the snapshot). ` +
      `restore ${report.restoreMs} ms + replay of ${report.replay?.events} events ${report.replay?.ms} ms (${JSON.stringify(report.replay?.counts)}). ` +
      `RPO: ${missing.length} acknowledged tasks missing, ${wrong.length} completed tasks not completed with their token. ` +
      `RTO: restore done ${backAt - fault} ms after the loss, tasks completing again at ${firstCompletionMs} ms, all ${ids.length} completed at ${allDoneMs} ms; ` +
      `sweep after restore re-published ${sweep.republished}; provider submissions ${stats.submissions} for ${ids.length} tasks (duplicates ${stats.duplicateFingerprints})`,
  );
  // The apps keep working on the restored database with their own roles (issue 34): the dump has no
  // privileges, the restore set the gateway's and the solver's grants again.
  const fresh = await api<{ id: string }>(s, "/v1/tasks", {
    method: "POST",
    body: {
      type: "turnstile",
      params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com/after-restore" },
    },
  });
  expect(fresh.status).toBe(202);
  expect((await api<TaskView>(s, `/v1/tasks/${fresh.body.id}?wait=30`)).body.status).toBe("completed");
  expect(missing).toEqual([]);
  expect(wrong.map((v) => v.id)).toEqual([]);
  expect(acceptedAfterSnapshot.length).toBeGreaterThan(0);
  expect(completedAfterSnapshot.length).toBeGreaterThan(0);
}, 180_000);
