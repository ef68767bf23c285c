// The runbook's five scenarios as drills, each run against a live stack (gateway, 2 solvers,
// real NATS and Postgres, the emulator as provider) under a steady load. Each must keep every
// acknowledged task (RPO = 0) and get the completion rate back within its RTO target; the
// reports are printed. Key rotation and config rollback are checked in detail on the way.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { type E2eStack as Stack, startE2eStack as startStack } from "@pipeline/devstack/stack";
import { eventually, PROVIDER_KEY } from "@pipeline/devstack/testing";
import {
  configHistory,
  liveWorkers,
  openConfigBucket,
  openWorkersBucket,
  SOLVER_CONFIG_KEY,
} from "@pipeline/shared/kv";
import { createLogger } from "@pipeline/shared/log";
import { connectNats, type NatsConnection } from "@pipeline/shared/nats";
import { RECOVERY_JS_API_TIMEOUT_MS, type RecoveryContext } from "../context.ts";
import { recentAudit } from "../fleet/audit.ts";
import { rollbackConfig, setConfig } from "../fleet/config-ops.ts";
import { fmtDuration } from "../incidents/model.ts";
import { incidentByKey } from "../incidents/store.ts";
import { type DrillOptions, renderDrillReport, runDrill } from "./run-drill.ts";
import type { Scenario } from "./scenarios.ts";

const SPARE_KEY = "e2e-provider-key-spare-0002";
const region = "drills";
let s: Stack;
let nc: NatsConnection;
let ctx: RecoveryContext;
let configKv: KV;
let workersKv: KV;
const dir = mkdtempSync(join(tmpdir(), "drills-"));

beforeAll(async () => {
  const keysFile = join(dir, "provider-keys.json");
  writeFileSync(keysFile, JSON.stringify({ primary: PROVIDER_KEY, spare: SPARE_KEY }));
  s = await startStack({
    region,
    solvers: 2,
    emulator: { latencyMs: 300, keys: { [PROVIDER_KEY]: { threads: 1000 }, [SPARE_KEY]: { threads: 1000 } } },
    // The defaults for leases and AckWait (30 s): worker-crash is held to 10 s with them (issue 16).
    solverEnv: { PROVIDER_KEY_NAME: "primary", PROVIDER_KEYS_FILE: keysFile, DRAIN_TIMEOUT_MS: "2000" },
  });
  nc = await connectNats(s.nats.url, "drills-test", s.nats.auth("admin"));
  const jsm = await jetstreamManager(nc, { timeout: RECOVERY_JS_API_TIMEOUT_MS });
  ctx = {
    region,
    nc,
    js: jetstream(nc),
    jsm,
    database: s.db,
    log: createLogger("recovery", { level: "silent" }),
    publishDeadlineMs: 10_000,
  };
  configKv = await openConfigBucket(nc, region);
  workersKv = await openWorkersBucket(nc, region);
  await eventually(async () => (await liveWorkers(workersKv)).workers.length === 2, 20_000, 200);
}, 60_000);

afterAll(async () => {
  await nc?.close();
  await s?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const ops = () => ({ config: configKv, workers: workersKv, db: s.db.db, actor: "drill-test@ci" });

async function drill(scenario: Scenario, extra: Partial<DrillOptions> = {}) {
  const report = await runDrill({
    scenario,
    ctx,
    configKv,
    workersKv,
    actor: "drill-test@ci",
    databaseUrl: s.tdb.url,
    snapshotDir: join(dir, "snapshots"),
    snapshotKeep: 3,
    gatewayGraceMs: 3000,
    gatewayUrl: s.gatewayUrl,
    apiKey: s.apiKey,
    rate: 10,
    baselineMs: 3000,
    timeoutMs: 120_000,
    // queue-loss and db-loss destroy live state: the CLI asks for --yes (issue 14).
    confirmed: true,
    ...extra,
  });
  console.log(`[drills] ${renderDrillReport(report)}`);
  expect(report.figures.acknowledged).toBeGreaterThan(30);
  expect(report.rpo).toBe(0);
  expect(report.rtoMs).not.toBeNull();
  expect(report.rtoMs!).toBeLessThanOrEqual(report.rtoTargetMs);
  expect(report.catchUpMs).not.toBeNull();
  expect(report.catchUpMs!).toBeLessThanOrEqual(report.catchUpTargetMs);
  // The receipt's money: every completed task of the drill charged once in the ledger (a db-loss
  // task that completed after the snapshot and came back without its token was solved and charged too).
  expect(report.money!.tasks).toBe(report.figures.completed + report.figures.tokensLost);
  expect(report.money!.totalMicros).toBeGreaterThan(0);
  expect(renderDrillReport(report)).toContain("money: $");
  await expectIncident(report);
  return report;
}

/** The drill recorded its incident (docs/incidents.md): read back from Postgres, and through the CLI's post-mortem. */
async function expectIncident(report: Awaited<ReturnType<typeof runDrill>>) {
  const incident = await incidentByKey(s.db.sql, `drill:${report.runId}`);
  expect(incident).toMatchObject({
    id: report.incidentId,
    kind: "drill",
    region,
    open: false,
    rpo: report.rpo,
    rtoMs: report.rtoMs,
    tasksAffected: report.figures.acknowledged,
    extraPaid: report.money!.extraCharges,
    startedAt: new Date(report.faultAt).toISOString(),
  });
  const mttrMs = Math.max(report.rtoMs!, report.remedyMs, report.catchUpMs!);
  expect(incident!.mttrMs).toBe(mttrMs);
  const cli = Bun.spawnSync(
    [process.execPath, "apps/recovery/src/cli.ts", "incident", String(incident!.id), "--markdown"],
    {
      cwd: `${import.meta.dir}/../../../..`,
      env: { ...process.env, DATABASE_URL: s.tdb.url, NATS_URL: s.nats.url, REGION: region },
    },
  );
  const md = cli.stdout.toString();
  expect(cli.exitCode).toBe(0);
  expect(md).toContain(`# Incident ${incident!.id}: drill in ${region}`);
  expect(md).toContain(`| MTTR (start to end) | ${fmtDuration(mttrMs)} |`);
  expect(md).toContain(`| RPO (acknowledged tasks lost or failed) | ${report.rpo} |`);
  console.log(
    `[drills] incident ${incident!.id}: MTTR ${fmtDuration(mttrMs)}, detection to recovery ${fmtDuration(incident!.detectToRecoverMs)}`,
  );
}

test("an invalid config changes no solver; config rollback restores the previous revision", async () => {
  const good = await setConfig(ops(), { providerKey: "primary", pollIntervalMs: 100 }, "baseline");
  await eventually(
    async () => (await liveWorkers(workersKv)).workers.every((w) => w.configRevision === good.revision),
    10_000,
    100,
  );
  // A typo'd field, then a key name no solver has: both refused, the good revision stays.
  const typo = await configKv.put(
    SOLVER_CONFIG_KEY,
    JSON.stringify({ providerKey: "primary", pollIntervall: 100, changedBy: "x", changedAt: new Date().toISOString() }),
  );
  await eventually(
    async () => (await liveWorkers(workersKv)).workers.every((w) => w.configRejected?.revision === typo),
    10_000,
    100,
  );
  const unknownKey = await configKv.put(
    SOLVER_CONFIG_KEY,
    JSON.stringify({ providerKey: "nope", changedBy: "x", changedAt: new Date().toISOString() }),
  );
  await eventually(
    async () => (await liveWorkers(workersKv)).workers.every((w) => w.configRejected?.revision === unknownKey),
    10_000,
    100,
  );
  const { workers } = await liveWorkers(workersKv);
  expect(workers.map((w) => [w.configRevision, w.keyName])).toEqual([
    [good.revision, "primary"],
    [good.revision, "primary"],
  ]);
  expect(workers[0]!.configRejected!.error).toContain("providerKey");
  // The CLI side refuses invalid input before anything is written.
  await expect(setConfig(ops(), { providerKey: "primary", maxPolls: 99 })).rejects.toThrow(/maxPolls/);
  expect((await configHistory(configKv)).at(-1)!.revision).toBe(unknownKey);
  // Rollback: the newest valid revision before the current one, stored anew and applied.
  const rb = await rollbackConfig(ops());
  expect(rb.restored).toBe(good.revision);
  await eventually(
    async () =>
      (await liveWorkers(workersKv)).workers.every(
        (w) => w.configRevision === rb.revision && w.configRejected === null,
      ),
    10_000,
    100,
  );
  const audit = await recentAudit(s.db.db, 5);
  expect(audit.map((a) => a.action)).toContain("config.rollback");
}, 60_000);

test("drill config-corruption: garbage in the bucket is refused by every solver, rollback, RPO 0", async () => {
  const r = await drill("config-corruption");
  expect(r.detail.refusedBy).toHaveLength(2);
  expect(r.detail.rolledBackTo).not.toBeNull();
}, 200_000);

test("drill key-compromise: every solver switches without a restart; the leaked key is never used again", async () => {
  const r = await drill("key-compromise", {
    keyTo: "spare",
    // The operator revokes the leaked key at the provider once the fleet has switched.
    afterInject: () => s.emu.configure({ keys: { [SPARE_KEY]: { threads: 1000 } } }),
  });
  const stats = s.emu.stats();
  const switchedAt = r.faultAt + r.remedyMs;
  expect(stats.lastCallAtByKey[PROVIDER_KEY]!).toBeLessThanOrEqual(switchedAt);
  expect(stats.lastCallAtByKey[SPARE_KEY]!).toBeGreaterThan(switchedAt);
  const { workers } = await liveWorkers(workersKv);
  expect(new Set(workers.map((w) => w.keyName))).toEqual(new Set(["spare"]));
  const audit = await recentAudit(s.db.db, 10);
  const rotation = audit.find((a) => a.action === "key.rotate")!;
  expect(rotation.detail).toMatchObject({ from: "primary", to: "spare" });
  expect(JSON.stringify(audit)).not.toContain(SPARE_KEY);
  expect(JSON.stringify(audit)).not.toContain(PROVIDER_KEY);
  expect(s.logs()).not.toContain(SPARE_KEY);
}, 200_000);

test("drill worker-crash: kill -9 of a solver under load, RPO 0", async () => {
  await drill("worker-crash");
  s.spawnSolver();
  await eventually(async () => (await liveWorkers(workersKv)).workers.length === 2, 20_000, 200);
}, 200_000);

test("drill queue-loss: TASKS deleted under load, rebuild-queue, solvers recreate their consumers, RPO 0", async () => {
  const before = s.emu.stats().duplicateFingerprints;
  await drill("queue-loss");
  expect(s.emu.stats().duplicateFingerprints).toBe(before);
}, 200_000);

test("drill db-loss: database dropped under load, restore + EVENTS replay, RPO 0", async () => {
  await drill("db-loss");
}, 240_000);
