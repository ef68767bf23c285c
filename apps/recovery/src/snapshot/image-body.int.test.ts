// Database loss with image tasks, their bodies no longer in EVENTS (docs/security.md, "Image
// bodies"): one image task accepted before the snapshot (its body in the dump), one after (its body
// only in BODIES), one after whose body has left BODIES (deleted here, as its retention would).
// Restore + replay rebuilds the first two with their bodies and a solver started only after the
// restore solves them; the third comes back failed with BODY_UNAVAILABLE, never sent to the provider.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { api, startE2eStack as startStack } from "@pipeline/devstack/stack";
import { eventually } from "@pipeline/devstack/testing";
import { connectNats } from "@pipeline/shared/nats";
import type { TaskView } from "@pipeline/shared/schemas";
import { bodySubject, streams } from "@pipeline/shared/subjects";
import postgres from "postgres";
import { adminStatement, withDatabase } from "../adapters/pg-tools.ts";
import { restoreSnapshot } from "./restore.ts";
import { takeSnapshot } from "./take-snapshot.ts";

const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

const image = (text: string) => ({ type: "image", params: { body: Buffer.from(text).toString("base64"), numeric: 1 } });

test("restore + replay rebuilds image tasks with their bodies from BODIES and they are solved; a body gone from BODIES gives a failed task (BODY_UNAVAILABLE)", async () => {
  const region = "rimgbody";
  // No solver yet: the tasks stay queued through the loss, so the restored rows are what gets solved.
  const s = await startStack({ region, solvers: 0, emulator: { latencyMs: 50 } });
  cleanups.push(() => s.stop());
  const nc = await connectNats(s.nats.url, "recovery-image-test", s.nats.auth("admin"));
  cleanups.push(() => nc.close());
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  const snapDir = mkdtempSync(join(tmpdir(), "recovery-image-"));
  cleanups.push(async () => rmSync(snapDir, { recursive: true, force: true }));

  const submit = async (text: string) => {
    const r = await api<{ id: string }>(s, "/v1/tasks", { method: "POST", body: image(text) });
    expect(r.status).toBe(202);
    return r.body.id;
  };
  const inDump = await submit("before the snapshot");
  const snap = await takeSnapshot({ databaseUrl: s.tdb.url, dir: snapDir, keep: 3, region, jsm });
  const inBodies = await submit("after the snapshot");
  const gone = await submit("after the snapshot, body aged out");
  // The body of `gone` leaves BODIES, as BODIES_MAX_AGE_MS would make it.
  const goneBody = await jsm.streams.getMessage(streams.bodies(region), { last_by_subj: bodySubject(region, gone) });
  expect(goneBody).not.toBeNull();
  await jsm.streams.deleteMessage(streams.bodies(region), goneBody!.seq);

  // The database is lost; the cluster's roles (the apps' logins) are not.
  const adminUrl = withDatabase(s.tdb.url, "postgres");
  await adminStatement(adminUrl, "drop", s.tdb.name);
  const restoredName = `${s.tdb.name}_restored`;
  await adminStatement(adminUrl, "create", restoredName);
  const restoredUrl = withDatabase(s.tdb.url, restoredName);
  const report = await restoreSnapshot({ snapshot: snap, intoUrl: restoredUrl, nats: { js, jsm } });
  expect(report.replay?.counts.inserted).toBe(1);
  expect(report.replay?.counts.bodyUnavailable).toBe(1);
  const check = postgres(restoredUrl, { max: 1, onnotice: () => {} });
  const rows = new Map(
    (
      await check<
        { id: string; state: string; params: { body?: string }; error_code: string | null }[]
      >`select id, state, params, error_code from tasks`
    ).map((r) => [r.id, r]),
  );
  await check.end({ timeout: 5 });
  expect(rows.get(inDump)).toMatchObject({ state: "queued", params: image("before the snapshot").params });
  expect(rows.get(inBodies)).toMatchObject({ state: "queued", params: image("after the snapshot").params });
  expect(rows.get(gone)).toMatchObject({ state: "failed", params: {}, error_code: "BODY_UNAVAILABLE" });

  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`alter database "${restoredName}" rename to "${s.tdb.name}"`);
  await admin.end({ timeout: 5 });
  s.spawnSolver();
  const views = await eventually(
    async () => {
      const v = await Promise.all(
        [inDump, inBodies, gone].map(async (id) => (await api<TaskView>(s, `/v1/tasks/${id}`)).body),
      );
      return v[0]!.status === "completed" && v[1]!.status === "completed" ? v : undefined;
    },
    60_000,
    200,
  );
  expect(views[0]!.result?.token).toBeTruthy();
  expect(views[1]!.result?.token).toBeTruthy();
  expect(views[2]).toMatchObject({ status: "failed", error: { code: "BODY_UNAVAILABLE" } });
  // Two provider submissions: the bodyless task never reached the provider.
  expect(s.emu.stats().submissions).toBe(2);
}, 120_000);
