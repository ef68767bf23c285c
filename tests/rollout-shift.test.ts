// Work moved between two solver versions under steady load (issue 15, versioned consumer groups):
// v2 starts idle beside v1, `npm run rollout -- shift` gives it 25%, 50%, then 100% of the shards
// and finally gives them all back to v1 (a rollback). Every acknowledged task completes, each is
// paid for once at the provider, and both versions solved tasks.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { jetstreamManager } from "@nats-io/jetstream";
import { natsEnv } from "@pipeline/devstack";
import { eventually, readTaskEvents } from "@pipeline/devstack/testing";
import { workerNameOf } from "@pipeline/shared/kv";
import { connectNats, type NatsConnection } from "@pipeline/shared/nats";
import type { TaskView } from "@pipeline/shared/schemas";
import { laneConsumer, streams } from "@pipeline/shared/subjects";
import { api, ROOT, type Stack, startStack, steadyLoad } from "./harness.ts";

const REGION = "ro";
let s: Stack;
let nc: NatsConnection;

beforeAll(async () => {
  s = await startStack({
    region: REGION,
    solvers: 2,
    emulator: { latencyMs: 400 },
    solverEnv: { SOLVER_VERSION: "v1", DRAIN_TIMEOUT_MS: "2000" },
  });
  nc = await connectNats(s.nats.url, "rollout-test", s.nats.auth("admin"));
  await eventually(
    async () =>
      (await (
        await jetstreamManager(nc)
      ).consumers
        .info(streams.tasks(REGION), laneConsumer(REGION, "normal", "v1"))
        .catch(() => undefined)) !== undefined,
    20_000,
    200,
  );
  s.spawnSolver({ SOLVER_VERSION: "v2" });
  s.spawnSolver({ SOLVER_VERSION: "v2" });
}, 60_000);
afterAll(async () => {
  await nc?.close();
  await s?.stop();
});

async function rollout(...args: string[]): Promise<{ code: number; out: string }> {
  const p = Bun.spawn([process.execPath, `${ROOT}/apps/rollout/src/cli.ts`, ...args], {
    env: { ...process.env, NATS_URL: s.nats.url, REGION, ...natsEnv(s.nats, "rollout") },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out: out + err };
}

const filters = async (version: string) =>
  (await (await jetstreamManager(nc)).consumers.info(streams.tasks(REGION), laneConsumer(REGION, "normal", version)))
    .config.filter_subjects ?? [];

test("v2 starts idle; shifts to 25%, 50%, 100% and back to v1 under load lose nothing and pay for nothing twice", async () => {
  await eventually(async () => (await filters("v2")).length > 0, 20_000, 200);
  expect(await filters("v2")).toEqual([`tasks.${REGION}.normal.idle_v2`]);
  expect((await rollout("status")).out).toContain("v1: 16/16 shards");

  const before = s.emu.stats().submissions;
  const load = steadyLoad(s, "shift", 240, 4, 120);
  const steps: string[] = [];
  for (const share of ["25%", "50%", "100%"]) {
    await Bun.sleep(1500);
    const r = await rollout("shift", "v2", share);
    expect(r.code).toBe(0);
    steps.push(r.out.trim());
  }
  expect(await filters("v2")).toHaveLength(16);
  expect(await filters("v1")).toEqual([`tasks.${REGION}.normal.idle_v1`]);
  await Bun.sleep(1500);
  const back = await rollout("shift", "v1", "100%");
  expect(back.code).toBe(0);
  steps.push(back.out.trim());
  await load.done;

  const views = await Promise.all(load.acked.map(({ id }) => api<TaskView>(s, `/v1/tasks/${id}?wait=60`)));
  const states = views.reduce<Record<string, number>>(
    (m, v) => ((m[v.body.status] = (m[v.body.status] ?? 0) + 1), m),
    {},
  );
  expect(states).toEqual({ completed: 240 });
  expect(s.emu.stats().submissions - before).toBe(240);
  expect(s.emu.stats().duplicateFingerprints).toBe(0);
  // Who took each task up: the `submitted` events name the worker (v1: solver-1, solver-2; v2: solver-3, solver-4).
  const byVersion = { v1: 0, v2: 0 };
  for (const e of await readTaskEvents(
    nc,
    REGION,
    load.acked.map((a) => a.id),
    ["submitted"],
  ))
    byVersion[["solver-3", "solver-4"].includes(workerNameOf(String(e.data?.worker))) ? "v2" : "v1"]++;
  const [slow] = await s.db.sql<
    { p50: number; max: number }[]
  >`select percentile_cont(0.5) within group (order by extract(epoch from completed_at - created_at))::float8 as p50, max(extract(epoch from completed_at - created_at))::float8 as max from tasks where idempotency_key like 'shift-%'`;
  console.log(
    `[rollout] ${steps.join(" | ")}; 240 tasks, solved by v1 ${byVersion.v1}, v2 ${byVersion.v2}; provider submissions ${s.emu.stats().submissions - before}; accepted to completed p50 ${slow!.p50.toFixed(2)} s, max ${slow!.max.toFixed(2)} s`,
  );
  expect(byVersion.v1).toBeGreaterThan(0);
  expect(byVersion.v2).toBeGreaterThan(0);
  expect(await filters("v2")).toEqual([`tasks.${REGION}.normal.idle_v2`]);
  expect((await rollout("status")).out).toContain("v1: 16/16 shards");
}, 120_000);

test("bad arguments are refused with exit 2 and change nothing", async () => {
  expect((await rollout("shift", "V2", "10")).code).toBe(2);
  expect((await rollout("shift", "v2", "120%")).code).toBe(2);
  expect((await rollout("shift", "v2", "99")).code).toBe(2);
  expect((await rollout("status")).out).toContain("v1: 16/16 shards");
});
