// Snapshots that survive their host (issue 16.4), on two NATS servers joined like two regions
// (each its own JetStream domain, hel1 a leafnode of fsn1): the recovery service copies each
// snapshot into hel1's Object Store and verifies it, and runs the retention job, counted in its
// metrics; then fsn1's NATS and snapshot folder are lost and `restore --from hel1 --events-from
// hel1` rebuilds the database from the copy and from hel1's mirror of fsn1's EVENTS. A copy whose
// bytes do not match its manifest is refused.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Objm } from "@nats-io/obj";
import { findPromtool, type NatsServerHandle, natsEnv } from "@pipeline/devstack";
import { startRegionPair, testServers } from "@pipeline/devstack/stack";
import {
  createTestDatabase,
  eventually,
  type Proc,
  ROOT,
  spawnApp,
  type TestDatabase,
} from "@pipeline/devstack/testing";
import { openDatabase } from "@pipeline/shared/db";
import { connectNats, ensureStreams, eventsMirrorConfig, type NatsConnection } from "@pipeline/shared/nats";
import type { TaskEvent } from "@pipeline/shared/schemas";
import { eventSubject, streams } from "@pipeline/shared/subjects";
import postgres from "postgres";
import { assess } from "./assess/assess.ts";
import { redriveTask } from "./console/redrive.ts";
import { listSnapshots } from "./snapshot/manifest.ts";
import { copySnapshotOffHost, offHostBucket, offHostRecord } from "./snapshot/offhost.ts";
import { takeSnapshot } from "./snapshot/take-snapshot.ts";

const logDir = mkdtempSync(join(tmpdir(), "recovery-offhost-"));
const servers = testServers();
let fsn1: NatsServerHandle;
let hel1: NatsServerHandle;
let source: TestDatabase;
let sql: postgres.Sql;
let ncA: NatsConnection;
let ncB: NatsConnection;
let service: Proc | undefined;
const extra: TestDatabase[] = [];

beforeAll(async () => {
  ({ first: fsn1, second: hel1 } = await startRegionPair(servers, ["fsn1", "hel1"]));
  source = await createTestDatabase("offhost_src");
  sql = postgres(source.url, { max: 2, onnotice: () => {} });
  ncA = await connectNats(fsn1.url, "offhost-test-fsn1", fsn1.auth("recovery"));
  ncB = await connectNats(hel1.url, "offhost-test-hel1", hel1.auth("admin"));
  await ensureStreams(await jetstreamManager(ncA), { region: "fsn1" });
  // hel1 mirrors fsn1's EVENTS, as the replicator sets it up in a two-region deployment.
  await eventually(
    async () => (await (await jetstreamManager(ncB)).streams.add(eventsMirrorConfig("fsn1"))) && true,
    20_000,
    200,
  );
}, 60_000);

afterAll(async () => {
  await service?.kill("SIGTERM");
  await ncA?.close().catch(() => {});
  await ncB?.close().catch(() => {});
  await sql?.end({ timeout: 5 });
  for (const d of [source, ...extra]) await d?.drop().catch(() => {});
  await fsn1?.stop().catch(() => {});
  await hel1?.stop();
  await servers.stop();
});

const DAY = 24 * 3600_000;
async function insertTask(o: {
  state: string;
  token?: string | null;
  expiresAgoMs?: number;
  finishedAgoMs: number;
  version?: number;
}): Promise<string> {
  const id = crypto.randomUUID();
  const finished = new Date(Date.now() - o.finishedAgoMs);
  await sql`
    insert into tasks (id, owner, request_hash, region, type, priority, params, state, version, token, token_expires_at, callback_url, created_at, updated_at, completed_at)
    values (${id}, 'owner-offhost', 'h', 'fsn1', 'turnstile', 'normal', ${JSON.stringify({ sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com/x" })}::text::jsonb, ${o.state}, ${o.version ?? 3},
            ${o.token ?? null}, ${o.expiresAgoMs === undefined ? null : new Date(Date.now() - o.expiresAgoMs)}, 'https://hooks.example.com/cb', ${finished}, ${finished},
            ${["completed", "failed", "cancelled"].includes(o.state) ? finished : null})`;
  return id;
}

const bucketOf = () => new Objm(jetstream(ncB)).open(offHostBucket("fsn1"));
const manifestsInBucket = async () =>
  (await (await bucketOf()).list())
    .filter((o) => !o.deleted && o.name.endsWith(".json"))
    .map((o) => o.name)
    .sort();

test("the service copies each snapshot to the other region's Object Store and verifies it, runs retention on schedule; its metrics count both; assess flags a snapshot without a copy", async () => {
  const expired = await insertTask({
    state: "completed",
    token: "TOKEN-OLD",
    expiresAgoMs: 3 * 3600_000,
    finishedAgoMs: 3 * 3600_000,
  });
  const ancient = await insertTask({ state: "failed", finishedAgoMs: 40 * DAY });
  const fresh = await insertTask({
    state: "completed",
    token: "TOKEN-FRESH",
    expiresAgoMs: -120_000,
    finishedAgoMs: 1000,
  });
  const failedOld = await insertTask({ state: "failed", finishedAgoMs: 8 * DAY });
  const failedNew = await insertTask({ state: "failed", finishedAgoMs: 60_000 });
  const snapshots = mkdtempSync(join(tmpdir(), "offhost-service-"));
  service = spawnApp(
    "recovery-fsn1",
    "apps/recovery/src/main.ts",
    {
      NATS_URL: fsn1.url,
      ...natsEnv(fsn1, "recovery"),
      DATABASE_URL: source.url,
      REGION: "fsn1",
      LOG_LEVEL: "info",
      SNAPSHOT_DIR: snapshots,
      SNAPSHOT_INTERVAL_MS: "1500",
      SNAPSHOT_KEEP: "2",
      SNAPSHOT_OFFHOST: "hel1",
      SWEEP_INTERVAL_MS: "0",
      RETENTION_INTERVAL_MS: "1000",
      TOKEN_GRACE_MS: "3600000",
      RECOVERY_METRICS_PORT: "0",
    },
    logDir,
  );
  // Retention: the 40-day-old failed row is deleted, the token expired 3 h ago erased, the valid one kept.
  // One pass deletes rows first and erases tokens after (retention.ts): each is waited for on its own.
  await eventually(async () => (await sql`select 1 from tasks where id = ${ancient}`).length === 0, 20_000, 100);
  const tokenOf = async (id: string) =>
    (await sql<{ token: string | null }[]>`select token from tasks where id = ${id}`)[0]!.token;
  await eventually(async () => (await tokenOf(expired)) === null, 20_000, 100);
  const [f] = await sql<{ token: string | null }[]>`select token from tasks where id = ${fresh}`;
  expect(f!.token).toBe("TOKEN-FRESH");
  // Copies: several snapshots go by; the bucket keeps the newest two (SNAPSHOT_KEEP), each verified.
  await eventually(
    async () => {
      const local = listSnapshots(snapshots);
      return (
        local.length === 2 &&
        local.every((s) => offHostRecord(s)) &&
        (await manifestsInBucket()).length === 2 &&
        service!.log().split("snapshot copied off the host and verified").length > 3
      );
    },
    40_000,
    250,
  );
  const store = await bucketOf();
  for (const s of listSnapshots(snapshots)) {
    const blob = await store.getBlob(s.manifest.dumpFile);
    expect(createHash("sha256").update(blob!).digest("hex")).toBe(s.manifest.sha256);
    expect(offHostRecord(s)).toMatchObject({
      domain: "hel1",
      bucket: "snapshots_fsn1",
      sha256: s.manifest.sha256,
      bytes: s.manifest.bytes,
    });
    expect(statSync(s.manifestPath.replace(/\.json$/, ".offhost.json")).mode & 0o777).toBe(0o600);
  }
  expect((await manifestsInBucket()).sort()).toEqual(
    listSnapshots(snapshots)
      .map((s) => `${s.manifest.name}.json`)
      .sort(),
  );
  // Metrics on RECOVERY_METRICS_PORT.
  const url = /"metrics":"(http:\/\/[^"]+)"/.exec(service.log())?.[1];
  expect(url).toBeTruthy();
  const text = await (await fetch(url!)).text();
  expect(
    Number(/recovery_snapshot_offhost_copies_total\{result="ok"[^}]*\} (\d+)/.exec(text)?.[1]),
  ).toBeGreaterThanOrEqual(3);
  expect(text).toMatch(/recovery_snapshot_offhost_copies_total\{result="error"[^}]*\} 0/);
  expect(text).toMatch(/recovery_retention_rows_total\{action="row_deleted"[^}]*\} 1\b/);
  expect(text).toMatch(/recovery_retention_rows_total\{action="token_erased"[^}]*\} 1\b/);
  expect(text).toMatch(/recovery_retention_last_success_timestamp_seconds\{[^}]*\} \d/);
  const lint = spawnSync(findPromtool(), ["check", "metrics"], { input: text, encoding: "utf8" });
  expect(lint.status, `${lint.stdout}${lint.stderr}`).toBe(0);
  await service.kill("SIGTERM");
  service = undefined;
  // Records of snapshots pruned locally went with them.
  expect(readdirSync(snapshots).filter((f) => f.endsWith(".offhost.json")).length).toBe(
    listSnapshots(snapshots).length,
  );

  // A failed task whose params retention erased cannot be redriven from the console (nothing left
  // to solve); one that still has them can.
  const [p] = await sql<{ params: Record<string, unknown> }[]>`select params from tasks where id = ${failedOld}`;
  expect(p!.params).toEqual({});
  const database = openDatabase(source.url, { max: 1 });
  try {
    const deps = {
      sql,
      db: database.db,
      js: jetstream(ncA),
      region: "fsn1",
      deadlineMs: 600_000,
      publishDeadlineMs: 5000,
    };
    expect(await redriveTask(deps, failedOld, "test")).toMatchObject({ ok: false, status: 409 });
    expect((await sql<{ state: string }[]>`select state from tasks where id = ${failedOld}`)[0]!.state).toBe("failed");
    expect(await redriveTask(deps, failedNew, "test")).toMatchObject({ ok: true, redrives: 1 });
  } finally {
    await database.close();
  }

  // The CLI: `snapshots` says where each copy is; `retention` runs the same job once.
  const cliEnv = {
    NATS_URL: fsn1.url,
    ...natsEnv(fsn1, "recovery"),
    DATABASE_URL: source.url,
    REGION: "fsn1",
    SNAPSHOT_DIR: snapshots,
    SNAPSHOT_OFFHOST: "hel1",
  };
  const taken = await cli(["snapshot", "--json"], { ...cliEnv, SNAPSHOT_KEEP: "2" });
  expect(taken.code, taken.out).toBe(0);
  const t = JSON.parse(taken.out) as { name: string; sha256: string; offHost: { domain: string; sha256: string } };
  expect(t.offHost).toMatchObject({ domain: "hel1", sha256: t.sha256 });
  expect(await manifestsInBucket()).toContain(`${t.name}.json`);
  const listed = await cli(["snapshots", "--json"], cliEnv);
  expect(listed.code, listed.out).toBe(0);
  const l = JSON.parse(listed.out) as {
    offHostDomain: string;
    snapshots: Array<{ name: string; local: boolean; inOffHostBucket: boolean; offHost: { domain: string } | null }>;
  };
  expect(l.offHostDomain).toBe("hel1");
  expect(l.snapshots.length).toBe(2);
  expect(l.snapshots.every((x) => x.local && x.inOffHostBucket && x.offHost?.domain === "hel1")).toBe(true);
  const ancient2 = await insertTask({ state: "cancelled", finishedAgoMs: 31 * DAY });
  const ret = await cli(["retention", "--json"], cliEnv);
  expect(ret.code, ret.out).toBe(0);
  expect(JSON.parse(ret.out)).toMatchObject({ rowsDeleted: 1, tokensErased: 0 });
  expect((await sql`select 1 from tasks where id = ${ancient2}`).length).toBe(0);

  // assess: ok while the newest snapshot has its copy; a warning for a newer one without; a
  // failure when no recent snapshot has one.
  const check = async () =>
    (
      await assess({
        region: "fsn1",
        jsm: new Error("n/a"),
        sql: new Error("n/a"),
        snapshotDir: snapshots,
        snapshotMaxAgeMs: 60_000,
        staleAfterMs: 60_000,
        provider: { url: "http://127.0.0.1:1", key: undefined, timeoutMs: 100 },
        offHostDomain: "hel1",
      })
    ).checks.find((c) => c.name === "offhost");
  expect((await check())?.level).toBe("ok");
  await takeSnapshot({
    databaseUrl: source.url,
    dir: snapshots,
    keep: 5,
    region: "fsn1",
    jsm: await jetstreamManager(ncA),
  });
  expect((await check())?.level).toBe("warn");
  for (const f of readdirSync(snapshots).filter((f) => f.endsWith(".offhost.json"))) rmSync(join(snapshots, f));
  expect(await check()).toMatchObject({ level: "fail", summary: "no snapshot has a verified copy in hel1" });
}, 120_000);

/** Runs the recovery CLI; returns its exit code and output. */
async function cli(args: string[], env: Record<string, string>): Promise<{ code: number; out: string }> {
  const p = Bun.spawn([process.execPath, join(ROOT, "apps/recovery/src/cli.ts"), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH!, LOG_LEVEL: "warn", ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text()]);
  return { code: await p.exited, out: out + err };
}

test("the host is lost (its NATS and snapshot folder): restore --from hel1 --events-from hel1 rebuilds the database from the verified copy and hel1's mirror of EVENTS; a tampered copy is refused", async () => {
  const jsA = jetstream(ncA);
  const solving = await insertTask({ state: "solving", finishedAgoMs: 0, version: 2 });
  const done = await insertTask({
    state: "completed",
    token: "TOKEN-DONE",
    expiresAgoMs: -120_000,
    finishedAgoMs: 500,
  });
  const dir = mkdtempSync(join(tmpdir(), "offhost-loss-"));
  const snap = await takeSnapshot({
    databaseUrl: source.url,
    dir,
    keep: 3,
    region: "fsn1",
    jsm: await jetstreamManager(ncA),
  });
  const record = await copySnapshotOffHost({ nc: ncA, domain: "hel1", bucket: offHostBucket("fsn1") }, snap, 3);
  expect(record.sha256).toBe(snap.manifest.sha256);
  // A copy that does not match the manifest (here: the dump changed on disk after the snapshot)
  // fails its verification and is not recorded.
  const spoiled = await takeSnapshot({
    databaseUrl: source.url,
    dir: mkdtempSync(join(tmpdir(), "offhost-spoiled-")),
    keep: 1,
    region: "fsn1",
    jsm: await jetstreamManager(ncA),
  });
  writeFileSync(spoiled.dumpPath, "bit rot");
  await expect(
    copySnapshotOffHost({ nc: ncA, domain: "hel1", bucket: "snapshots_spoiled" }, spoiled, 3),
  ).rejects.toThrow("does not match");
  expect(offHostRecord(spoiled)).toBeUndefined();
  // After the snapshot: a new task accepted, the solving one completed (its event says a token exists, without it).
  const fresh = crypto.randomUUID();
  const now = new Date().toISOString();
  const events: TaskEvent[] = [
    {
      taskId: fresh,
      kind: "accepted",
      state: "queued",
      version: 1,
      region: "fsn1",
      at: now,
      data: {
        owner: "owner-offhost",
        type: "turnstile",
        priority: "normal",
        params: { sitekey: "s", pageurl: "https://example.com/y" },
        requestHash: "h2",
      },
    },
    {
      taskId: solving,
      kind: "completed",
      state: "completed",
      version: 3,
      region: "fsn1",
      at: now,
      data: {
        tokenStored: true,
        userAgent: null,
        expiresAt: new Date(Date.now() + 120_000).toISOString(),
        completedAt: now,
        providerId: "p-9",
      },
    },
  ];
  for (const ev of events) await jsA.publish(eventSubject("fsn1", ev.kind), JSON.stringify(ev));
  const originSeq = (await (await jetstreamManager(ncA)).streams.info(streams.events("fsn1"))).state.last_seq;
  const jsmB = await jetstreamManager(ncB);
  await eventually(
    async () => (await jsmB.streams.info(streams.events("fsn1"))).state.last_seq === originSeq,
    20_000,
    100,
  );

  // The host goes: fsn1's NATS (EVENTS with it) and the snapshot folder.
  await ncA.close();
  await fsn1.kill();
  rmSync(dir, { recursive: true, force: true });
  const target = await createTestDatabase("offhost_restored", undefined, { migrate: false });
  extra.push(target);
  const fetched = mkdtempSync(join(tmpdir(), "offhost-fetched-"));
  const env = { NATS_URL: hel1.url, ...natsEnv(hel1, "recovery"), REGION: "fsn1", SNAPSHOT_DIR: fetched };
  // The target's URL carries its password (the test cluster asks for one): through RESTORE_INTO_URL, not --into (visible in the process list).
  const r = await cli(["restore", "latest", "--from", "hel1", "--events-from", "hel1", "--json"], {
    ...env,
    RESTORE_INTO_URL: target.url,
  });
  expect(r.code, r.out).toBe(0);
  const report = JSON.parse(r.out) as { snapshot: string; replay: { events: number; counts: Record<string, number> } };
  expect(report.snapshot).toBe(snap.manifest.name);
  expect(report.replay.counts.inserted).toBe(1);
  expect(report.replay.counts.applied).toBe(1);
  // The fetched copy sits in SNAPSHOT_DIR, owner-only, and matches the manifest.
  expect(existsSync(join(fetched, snap.manifest.dumpFile))).toBe(true);
  expect(statSync(join(fetched, snap.manifest.dumpFile)).mode & 0o777).toBe(0o600);
  const t = postgres(target.url, { max: 1, onnotice: () => {} });
  try {
    const rows = new Map(
      (await t<{ id: string; state: string; token: string | null }[]>`select id, state, token from tasks`).map((x) => [
        x.id,
        x,
      ]),
    );
    const [srcCount] = await sql<{ n: number }[]>`select count(*)::int as n from tasks`;
    expect(rows.size).toBe(srcCount!.n + 1);
    expect(rows.get(done)).toMatchObject({ state: "completed", token: "TOKEN-DONE" });
    expect(rows.get(solving)).toMatchObject({ state: "completed", token: null });
    expect(rows.get(fresh)?.state).toBe("queued");
  } finally {
    await t.end({ timeout: 5 });
  }

  // A copy whose bytes no longer match its manifest is refused before anything is restored.
  const store = await bucketOf();
  await store.putBlob({ name: snap.manifest.dumpFile }, new TextEncoder().encode("not the dump"));
  const target2 = await createTestDatabase("offhost_tampered", undefined, { migrate: false });
  extra.push(target2);
  const bad = await cli(["restore", snap.manifest.name, "--from", "hel1", "--no-replay"], {
    ...env,
    RESTORE_INTO_URL: target2.url,
    SNAPSHOT_DIR: mkdtempSync(join(tmpdir(), "offhost-fetched2-")),
  });
  expect(bad.code).toBe(1);
  expect(bad.out).toContain("fails its checksum");
  const t2 = postgres(target2.url, { max: 1, onnotice: () => {} });
  try {
    expect((await t2`select 1 from pg_tables where schemaname = 'public'`).length).toBe(0);
  } finally {
    await t2.end({ timeout: 5 });
  }
}, 120_000);
