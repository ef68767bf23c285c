// Stale sweep: a task Postgres says is unfinished but that no message will ever deliver is
// re-published and completes; a task that still has its message is left alone; a second
// sweep does nothing.
import { afterAll, expect, test } from "bun:test";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { api, type E2eStack as Stack, startE2eStack as startStack } from "@pipeline/devstack/stack";
import { eventually, natsEnv } from "@pipeline/devstack/testing";
import { FAIR_SHARE_KEY } from "@pipeline/shared/fair-share";
import { createLogger } from "@pipeline/shared/log";
import { connectNats } from "@pipeline/shared/nats";
import { buckets, shardOf, streams, taskSubject } from "@pipeline/shared/subjects";
import type { RecoveryContext } from "../context.ts";
import { recoverStale } from "./recover-stale.ts";

const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

async function recoveryContext(s: Stack, region: string): Promise<RecoveryContext> {
  const nc = await connectNats(s.nats.url, "recovery-test", s.nats.auth("admin"));
  cleanups.push(() => nc.close());
  return {
    region,
    nc,
    js: jetstream(nc),
    jsm: await jetstreamManager(nc),
    database: s.db,
    log: createLogger("recovery", { level: "silent" }),
    publishDeadlineMs: 5000,
  };
}

const params = (n: string) => ({ sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/sweep/${n}` });

test("stale sweep re-publishes a `solving` row with an expired lease and no message; it completes once, and a second sweep does nothing", async () => {
  const s = await startStack({ region: "rsweep", solvers: 1, emulator: { latencyMs: 100 } });
  cleanups.push(() => s.stop());
  const ctx = await recoveryContext(s, "rsweep");
  const id = crypto.randomUUID();
  // A worker claimed it, then died after its message was gone (the state a lost queue leaves).
  await s.db.sql`
    insert into tasks (id, owner, request_hash, region, type, priority, params, state, version, attempts, lease_owner, lease_until, deadline_at, created_at, updated_at)
    values (${id}, 'owner-sweep', 'hash', 'rsweep', 'turnstile', 'normal', ${JSON.stringify(params("orphan"))}::text::jsonb, 'solving', 1, 1, 'dead-worker',
            now() - interval '1 minute', now() + interval '10 minutes', now() - interval '2 minutes', now() - interval '2 minutes')`;
  const first = await recoverStale(ctx, { staleAfterMs: 60_000 });
  expect(first).toMatchObject({ candidates: 1, republished: 1, withMessage: 0 });
  const t0 = Date.now();
  const row = await eventually(async () => {
    const [r] = await s.db.sql<
      { state: string; token: string | null }[]
    >`select state, token from tasks where id = ${id}`;
    return r?.state === "completed" ? r : undefined;
  }, 20_000);
  expect(row.token).toBeTruthy();
  console.log(
    `[recovery-sweep] orphaned solving row: re-published by the sweep, completed ${Date.now() - t0} ms later`,
  );
  const second = await recoverStale(ctx, { staleAfterMs: 60_000 });
  expect(second).toMatchObject({ candidates: 0, republished: 0 });
  expect(s.emu.stats().submissions).toBe(1);
}, 60_000);

test("stale sweep leaves a stale `queued` row alone while its message is still in TASKS", async () => {
  const s = await startStack({ region: "rsweepq", solvers: 1, emulator: { latencyMs: 100 } });
  cleanups.push(() => s.stop());
  const ctx = await recoveryContext(s, "rsweepq");
  await s.solvers[0]!.kill();
  const r = await api<{ id: string }>(s, "/v1/tasks", {
    method: "POST",
    body: { type: "turnstile", params: params("backlog") },
  });
  expect(r.status).toBe(202);
  // Old, but only because nobody pulls: its message is waiting.
  await s.db.sql`update tasks set updated_at = now() - interval '10 minutes' where id = ${r.body.id}`;
  const report = await recoverStale(ctx, { staleAfterMs: 60_000 });
  expect(report).toMatchObject({ candidates: 1, withMessage: 1, republished: 0 });
  s.spawnSolver();
  await eventually(
    async () => (await s.db.sql`select 1 from tasks where id = ${r.body.id} and state = 'completed'`).length === 1,
    20_000,
  );
  expect(s.emu.stats()).toMatchObject({ submissions: 1, duplicateFingerprints: 0 });
}, 60_000);

test("a client's task goes back on its fair-share group's subjects, another client's on the lane's own", async () => {
  const region = "rsweepg";
  const s = await startStack({ region, solvers: 1, emulator: { latencyMs: 100 } });
  cleanups.push(() => s.stop());
  const ctx = await recoveryContext(s, region);
  await s.solvers[0]!.kill();
  const member = "0123456789abcdef";
  const kv = await new Kvm(ctx.nc).open(buckets.region(region));
  await kv.put(
    FAIR_SHARE_KEY,
    JSON.stringify({
      groups: { team: { weight: 3, clients: [member] } },
      defaultWeight: 1,
      by: "test",
      at: new Date().toISOString(),
    }),
  );
  const stale = async (owner: string) => {
    const id = crypto.randomUUID();
    await s.db.sql`
      insert into tasks (id, owner, request_hash, region, type, priority, params, state, version, deadline_at, created_at, updated_at)
      values (${id}, ${owner}, 'hash', ${region}, 'turnstile', 'normal', ${JSON.stringify(params(id))}::text::jsonb, 'queued', 0,
              now() + interval '10 minutes', now() - interval '2 minutes', now() - interval '2 minutes')`;
    return id;
  };
  const inGroup = await stale(member);
  const outside = await stale("fedcba9876543210");
  expect(await recoverStale(ctx, { staleAfterMs: 60_000 })).toMatchObject({ candidates: 2, republished: 2 });
  const stored = (await ctx.jsm.streams.info(streams.tasks(region), { subjects_filter: ">" })).state.subjects ?? {};
  expect(Object.keys(stored).sort()).toEqual(
    [taskSubject(region, "normal", shardOf(inGroup), "team"), taskSubject(region, "normal", shardOf(outside))].sort(),
  );
}, 60_000);

test("the CLI: assess reads the stack (exit 0 once a snapshot exists), snapshot writes one, bad arguments exit 2", async () => {
  const { PROVIDER_KEY } = await import("@pipeline/devstack/testing");
  const { mkdtempSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const s = await startStack({ region: "rcli", solvers: 1 });
  cleanups.push(() => s.stop());
  const env = {
    ...process.env,
    NATS_URL: s.nats.url,
    ...natsEnv(s.nats, "recovery"),
    DATABASE_URL: s.tdb.url,
    REGION: "rcli",
    PROVIDER_URL: s.emu.url,
    PROVIDER_KEY,
    SNAPSHOT_DIR: mkdtempSync(join(tmpdir(), "recovery-cli-")),
  };
  const cli = async (...args: string[]) => {
    const p = Bun.spawn([process.execPath, "apps/recovery/src/cli.ts", ...args], {
      cwd: join(import.meta.dir, "..", "..", "..", ".."),
      env,
      stdout: "pipe",
      stderr: "pipe",
    });
    const [out, err, code] = await Promise.all([
      new Response(p.stdout).text(),
      new Response(p.stderr).text(),
      p.exited,
    ]);
    return { out, err, code };
  };
  // The solver's first heartbeat (assess fails with no live solver): on a busy machine it comes after the gateway listens.
  await eventually(() => s.logs().includes("solver started"), 30_000, 100);
  const first = await cli("assess", "--json");
  const a = JSON.parse(first.out) as { level: string; queue: { lanes: unknown[] }; provider: { balance: string } };
  expect(a.queue.lanes.length).toBe(3);
  expect(Number(a.provider.balance)).toBeGreaterThan(0);
  expect(first.out).not.toContain(PROVIDER_KEY);
  expect(a.level).toBe("warn"); // no snapshot yet
  expect((await cli("snapshot")).code).toBe(0);
  const second = await cli("assess");
  expect(second.code).toBe(0);
  console.log(`[recovery-cli] assess:\n${second.out}`);
  expect((await cli("verify", "latest")).code).toBe(0);
  const bad = await cli("restore", "latest");
  expect(bad.code).toBe(2);
  expect(bad.err).toContain("--into");

  // The fleet commands: heartbeats, config in KV, rotation refused by a solver that lacks the key.
  const { writeFileSync } = await import("node:fs");
  // Held under `<WORKER_ID>.<incarnation>`, named by its WORKER_ID.
  const seen = (a as unknown as { workers: { workerId: string; name?: string }[] }).workers;
  expect(seen.map((w) => w.name)).toEqual(["solver-1"]);
  expect(seen[0]!.workerId).toMatch(/^solver-1\.i[0-9a-z]+$/);
  const workers = await cli("workers");
  expect(workers.out).toContain("solver-1");
  expect(workers.out).toContain("config rev env");
  const cfg = join(env.SNAPSHOT_DIR, "solver-config.json");
  writeFileSync(cfg, JSON.stringify({ providerKey: "default", pollIntervalMs: 100 }));
  const set = await cli("config", "set", cfg, "--by", "ops-test", "--reason", "first");
  expect(set.code).toBe(0);
  writeFileSync(cfg, JSON.stringify({ providerKey: "default", pollIntervalMs: 5 }));
  const refused = await cli("config", "set", cfg);
  expect(refused.code).toBe(1);
  expect(refused.err).toContain("pollIntervalMs");
  const rotate = await cli("rotate-key", "--to", "not-in-the-file", "--wait", "8000");
  expect(rotate.code).toBe(1);
  expect(rotate.out).toContain("REFUSED by solver-1");
  const assessed = await cli("assess");
  expect(assessed.out).toContain("refuses config rev");
  const rollback = await cli("config", "rollback", "--by", "ops-test");
  expect(rollback.code).toBe(0);
  const history = await cli("config", "history");
  console.log(`[recovery-cli] config history:\n${history.out}`);
  expect(history.out).toContain("ops-test@");
  const audit = await cli("audit");
  expect(audit.out).toContain("key.rotate");
  expect(audit.out).toContain("config.rollback");
  expect(audit.out).not.toContain(PROVIDER_KEY);
  expect((await cli("drill", "meteor-strike")).code).toBe(2);
  expect((await cli("rotate-key")).err).toContain("--to");
}, 90_000);
