// The compiled binaries (`npm run build`, issue 18) end to end: copied alone into an empty folder and
// run with an environment that holds no Bun, no node_modules and no repository, they migrate a fresh
// database (the SQL is inside the recovery binary) and solve tasks through real NATS and Postgres,
// against the compiled provider emulator, each task submitted to the provider once.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, natsEnv, waitForPort } from "@pipeline/devstack";
import {
  createTestDatabase,
  eventually,
  startTestNats,
  type TestDatabase,
  type TestNats,
} from "@pipeline/devstack/testing";
import { fingerprintOf } from "@pipeline/emulator";
import { toProviderParams } from "@pipeline/shared/provider";
import type { TaskSpec } from "@pipeline/shared/schemas";
import { type AppName, buildBinary, sha256File } from "../infra/build.ts";

const VERSION = `t${Date.now().toString(36)}`;
const APPS: AppName[] = ["gateway", "solver", "recovery", "rollout", "emulator"];
/** A PATH with the system's tools and nothing of ours: no bun, no node_modules/.bin. */
const BARE_PATH = "/usr/sbin:/usr/bin:/sbin:/bin";
const PROVIDER_KEY = "bin-provider-key-0001";
const API_KEY = "bin-client-key-0001-0123456789abcdef"; // 32+ characters: a production gateway

let work: string;
let nats: TestNats;
let tdb: TestDatabase;
const procs: { name: string; p: Bun.Subprocess; log: string }[] = [];
const bin = (app: AppName) => join(work, "opt", app);

function run(app: AppName, args: string[], env: Record<string, string>) {
  return Bun.spawnSync([bin(app), ...args], {
    cwd: join(work, "empty"),
    env: { PATH: BARE_PATH, HOME: join(work, "empty"), ...env },
  });
}

function start(name: string, app: AppName, env: Record<string, string>) {
  const log = join(work, `${name}.log`);
  const fd = openSync(log, "a");
  const p = Bun.spawn([bin(app)], {
    cwd: join(work, "empty"),
    env: { PATH: BARE_PATH, HOME: join(work, "empty"), ...env },
    stdout: fd,
    stderr: fd,
  });
  procs.push({ name, p, log });
  return p;
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "pipeline-bin-"));
  const out = join(work, "dist");
  const built = await Promise.all(APPS.map((app) => buildBinary({ app, arch: "x64", version: VERSION, outDir: out })));
  Bun.spawnSync(["mkdir", "-p", join(work, "opt"), join(work, "empty"), join(work, "state")]);
  for (const b of built) {
    expect(readFileSync(`${b.path}.sha256`, "utf8")).toBe(`${b.sha256}  ${b.app}-${VERSION}-linux-x64\n`);
    copyFileSync(b.path, bin(b.app));
    Bun.spawnSync(["chmod", "755", bin(b.app)]);
    expect(await sha256File(bin(b.app))).toBe(b.sha256);
  }
  [nats, tdb] = await Promise.all([
    startTestNats({ regions: ["bin"], provision: true }),
    createTestDatabase("bin", undefined, { migrate: false }),
  ]);
}, 120_000);

afterAll(async () => {
  await Promise.all(procs.map(async ({ p }) => (p.kill("SIGTERM"), await p.exited)));
  await Promise.all([nats?.dispose(), tdb?.drop()]);
  if (work) rmSync(work, { recursive: true, force: true });
});

test("the binaries need no Bun and no repository: PATH has no bun and the folder holds only the binaries", () => {
  expect(Bun.spawnSync(["sh", "-c", "command -v bun"], { env: { PATH: BARE_PATH } }).exitCode).not.toBe(0);
  expect(existsSync(join(work, "opt", "node_modules"))).toBe(false);
  const r = run("recovery", ["help"], {});
  expect(r.exitCode).toBe(0);
  expect(r.stdout.toString()).toContain("migrate [--json]");
});

test("recovery migrate applies the embedded migrations to a fresh database, then has nothing to do", () => {
  const first = run("recovery", ["migrate", "--json"], { DATABASE_URL: tdb.url });
  expect(first.stderr.toString()).toBe("");
  expect(first.exitCode).toBe(0);
  const r1 = JSON.parse(first.stdout.toString()) as { applied: string[]; total: number };
  expect(r1.applied.length).toBeGreaterThanOrEqual(6);
  expect(r1.total).toBe(r1.applied.length);
  const second = run("recovery", ["migrate"], { DATABASE_URL: tdb.url });
  expect(second.exitCode).toBe(0);
  expect(second.stdout.toString()).toContain("nothing to apply");
  const bad = run("recovery", ["migrate"], {});
  expect(bad.exitCode).toBe(2);
  expect(bad.stderr.toString()).toContain("DATABASE_URL");
});

function spec(i: number): TaskSpec {
  const pageurl = `https://shop.example.com/bin/${i}`;
  if (i % 3 === 0)
    return { type: "recaptcha_v2", params: { sitekey: "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-", pageurl } };
  if (i % 3 === 1) return { type: "turnstile", params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl } };
  return { type: "image", params: { body: Buffer.from(`bin captcha ${i}`).toString("base64"), numeric: 1 } };
}

test("gateway, solver, recovery and emulator binaries solve 150 tasks, each submitted once; the rollout binary serves its status and reads the shards", async () => {
  const [emuPort, gatewayPort, metricsPort] = await Promise.all([freePort(), freePort(), freePort()]);
  const common = { NATS_URL: nats.url, DATABASE_URL: tdb.url, REGION: "bin", LOG_LEVEL: "info" };
  start("emulator", "emulator", {
    EMULATOR_HOST: "127.0.0.1",
    EMULATOR_PORT: String(emuPort),
    EMULATOR_KEYS: `${PROVIDER_KEY}:1000`,
    EMULATOR_LATENCY_MS: "20",
  });
  // The gateway and the solver on their own database roles (issue 34), granted by the binary's migrate above.
  start("gateway", "gateway", {
    ...common,
    DATABASE_URL: tdb.appUrls.gateway,
    ...natsEnv(nats, "gateway"),
    GATEWAY_PORT: String(gatewayPort),
    API_KEYS: API_KEY,
    API_KEY_PEPPER: "bin-pepper-0123456789abcdef0123456789",
  });
  start("solver", "solver", {
    ...common,
    DATABASE_URL: tdb.appUrls.solver,
    ...natsEnv(nats, "solver"),
    PROVIDER_URL: `http://127.0.0.1:${emuPort}`,
    PROVIDER_KEY,
    PROVIDER_THREADS: "1000",
    FIRST_POLL_MS: "50",
    POLL_INTERVAL_MS: "100",
    METRICS_PORT: String(metricsPort),
    WORKER_ID: "bin-solver-1",
  });
  start("recovery", "recovery", {
    ...common,
    ...natsEnv(nats, "recovery"),
    DATA_DIR: join(work, "state"),
    SNAPSHOT_INTERVAL_MS: "0",
    PROVIDER_URL: `http://127.0.0.1:${emuPort}`,
  });
  await Promise.all([waitForPort(emuPort, 20_000), waitForPort(gatewayPort, 20_000)]);
  await eventually(async () => (await fetch(`http://127.0.0.1:${gatewayPort}/readyz`)).status === 200, 20_000);
  await eventually(async () => (await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).status === 200, 20_000);

  const gw = `http://127.0.0.1:${gatewayPort}`;
  const specs = Array.from({ length: 150 }, (_, i) => spec(i));
  const ids = await Promise.all(
    specs.map(async (body) => {
      const r = await fetch(`${gw}/v1/tasks`, {
        method: "POST",
        headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      expect(r.status).toBe(202);
      return ((await r.json()) as { id: string }).id;
    }),
  );
  const views = await Promise.all(
    ids.map(
      async (id) =>
        (await (
          await fetch(`${gw}/v1/tasks/${id}?wait=60`, { headers: { authorization: `Bearer ${API_KEY}` } })
        ).json()) as { status: string },
    ),
  );
  expect(views.reduce<Record<string, number>>((m, v) => ((m[v.status] = (m[v.status] ?? 0) + 1), m), {})).toEqual({
    completed: 150,
  });

  const stats = (await (await fetch(`http://127.0.0.1:${emuPort}/emulator/stats`)).json()) as {
    submissions: number;
    byFingerprint: Record<string, number>;
  };
  expect(stats.submissions).toBe(150);
  const perTask = specs.map((s) => {
    const form = toProviderParams(s);
    return stats.byFingerprint[fingerprintOf(form.method!, form)] ?? 0;
  });
  expect(perTask.filter((n) => n !== 1)).toEqual([]);

  // The recovery binary's CLI sees the compiled solver's heartbeat; its service loop is running.
  const workers = run("recovery", ["workers", "--json"], { ...common, ...natsEnv(nats, "recovery") });
  expect(workers.exitCode).toBe(0);
  expect(workers.stdout.toString()).toContain("bin-solver-1");
  // The rollout binary: its service starts (a status listener), its CLI reads the compiled solver's shards and process.
  const rolloutPort = await freePort();
  start("rollout", "rollout", {
    ...common,
    DATABASE_URL: tdb.appUrls.rollout,
    ...natsEnv(nats, "rollout"),
    ROLLOUT_HTTP_PORT: String(rolloutPort),
  });
  const st = await eventually(
    async () => {
      const r = await fetch(`http://127.0.0.1:${rolloutPort}/v1/rollout`).catch(() => undefined);
      const body = r?.ok
        ? ((await r.json()) as {
            regions: Record<string, { share: Record<string, number>; processes: Record<string, number> }>;
          })
        : undefined;
      return body?.regions.bin?.processes.v1 ? body : undefined;
    },
    20_000,
    200,
  );
  expect(st.regions.bin!.share).toEqual({ v1: 16 });
  const status = run("rollout", ["status"], { ...common, ...natsEnv(nats, "rollout") });
  expect(status.exitCode).toBe(0);
  expect(status.stdout.toString()).toContain("v1: 16/16 shards");
  expect(run("rollout", ["start", "v1"], { ...common, ...natsEnv(nats, "rollout") }).exitCode).toBe(2);
  expect(procs.every(({ p }) => p.exitCode === null)).toBe(true);
  const logs = procs.map(({ log }) => readFileSync(log, "utf8")).join("\n");
  expect(logs).toContain("recovery");
  for (const secret of [API_KEY, PROVIDER_KEY, natsEnv(nats, "solver").NATS_PASSWORD])
    expect(logs).not.toContain(secret);
}, 120_000);
