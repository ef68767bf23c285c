// The rollout controller against a real nats-server and Postgres, tick by tick: two regions (on one
// server, as their streams and buckets are per region), solvers' heartbeats written to the real
// workers buckets, task rows in the real table. The CLI is run as a process for start, the
// commands, status and history. The drills (tests/rollout-drills.test.ts) run it against real solvers.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { jetstreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { findPromtool, natsEnv } from "@pipeline/devstack";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@pipeline/devstack/testing";
import { type Database, openDatabase } from "@pipeline/shared/db";
import { openWorkersBucket } from "@pipeline/shared/kv";
import { createLogger } from "@pipeline/shared/log";
import { connectNats, ensureStreams, type NatsConnection } from "@pipeline/shared/nats";
import { ensureVersionConsumers, openRolloutBucket, readAssignment, shareOf } from "@pipeline/shared/shards";
import { eventSubject, shardOf, streams } from "@pipeline/shared/subjects";
import { createRolloutMetrics } from "./adapters/metrics.ts";
import { openRegionLink, type RegionLink } from "./adapters/regions.ts";
import { createRolloutStore, openControlBucket, type RolloutStore } from "./adapters/store.ts";
import { type Controller, createController } from "./controller.ts";
import type { Notice } from "./domain/notice.ts";
import { type Rollout, withLog } from "./domain/plan.ts";

const REGIONS = ["ra", "rb"];
let n: TestNats;
let tdb: TestDatabase;
let db: Database;
let admin: NatsConnection;
let links: Map<string, RegionLink>;
let store: RolloutStore;
let workers: Record<string, KV>;
let controller: Controller;
const log = createLogger("rollout-test", { level: "warn" });

beforeAll(async () => {
  n = await startTestNats({ regions: REGIONS });
  tdb = await createTestDatabase("rollout");
  db = openDatabase(tdb.url, { max: 2 });
  admin = await connectNats(n.url, "rollout-test", n.auth("admin"));
  const jsm = await jetstreamManager(admin);
  workers = {};
  for (const r of REGIONS) {
    await ensureStreams(jsm, { region: r });
    const kv = await openRolloutBucket(admin, r);
    for (const v of ["v1", "v2", "v3"])
      await ensureVersionConsumers(jsm, kv, { region: r, version: v, ackWaitMs: 30_000, by: "test" });
    workers[r] = await openWorkersBucket(admin, r);
  }
  links = new Map();
  for (const r of REGIONS)
    links.set(
      r,
      await openRegionLink(
        { name: r, natsUrl: n.url, auth: n.auth("rollout"), databaseUrl: tdb.appUrls.rollout },
        "rollout-test",
      ),
    );
  store = createRolloutStore(await openControlBucket(admin));
  controller = createController({
    store,
    regions: links,
    home: links.get("ra")!,
    ackWaitMs: 30_000,
    now: Date.now,
    log,
  });
}, 60_000);
afterAll(async () => {
  for (const l of links?.values() ?? []) await l.close();
  await admin?.close();
  await db?.close();
  await tdb?.drop();
  await n?.dispose();
});

const cli = async (...args: string[]) => {
  const p = Bun.spawn([process.execPath, `${import.meta.dir}/cli.ts`, ...args], {
    env: {
      ...process.env,
      NATS_URL: n.url,
      REGION: "ra",
      REGIONS: REGIONS.join(","),
      DATABASE_URL: tdb.appUrls.rollout,
      ...natsEnv(n, "rollout"),
      NATS_URL_RB: n.url,
      NATS_USER_RB: n.auth("rollout").user!,
      NATS_PASSWORD_RB: n.auth("rollout").pass!,
    },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out: out + err };
};

const startedAt = new Date(Date.now() - 60_000).toISOString();
const beat = (region: string, workerId: string, version: string, calls: number, errors = 0) =>
  workers[region]!.put(
    workerId,
    JSON.stringify({
      workerId,
      pid: 1,
      host: "h",
      version,
      startedAt,
      at: new Date().toISOString(),
      inFlight: 0,
      keyName: "k",
      keyRef: "r",
      breaker: "closed",
      configRevision: null,
      configRejected: null,
      tally: { providerCalls: calls, providerErrors: errors },
    }),
  );

/** `count` task rows in `region` whose shard `version` owns now, in the given shape. */
async function tasks(
  region: string,
  version: string,
  count: number,
  shape: { state: string; attempts?: number; errorCode?: string | null; submissions?: number; ms?: number },
) {
  const owners = (await readAssignment(links.get(region)!.shards))!.assignment.owners;
  const now = Date.now();
  if (!owners.includes(version)) return;
  for (let made = 0; made < count; ) {
    const id = crypto.randomUUID();
    if (owners[shardOf(id)] !== version) continue;
    made++;
    await db.sql`insert into tasks (id, owner, request_hash, region, type, priority, params, state, attempts, provider_submissions, error_code, created_at, completed_at)
      values (${id}, 'c', 'h', ${region}, 'recaptcha_v2', 'normal', '{}'::jsonb, ${shape.state}, ${shape.attempts ?? 1}, ${shape.submissions ?? 1}, ${shape.errorCode ?? null}, ${new Date(now - (shape.ms ?? 500)).toISOString()}::timestamptz, ${shape.state === "completed" ? new Date(now).toISOString() : null}::timestamptz)`;
  }
}

const share = async (region: string) => shareOf((await readAssignment(links.get(region)!.shards))!.assignment);
const record = async () => (await store.read())!.record;

/** Ticks until `done` holds, feeding both versions healthy traffic in the current region each time. */
async function tickUntil(
  done: (r: Rollout) => boolean,
  feed: (r: Rollout) => Promise<void>,
  max = 40,
): Promise<Rollout> {
  for (let i = 0; i < max; i++) {
    const r = await record();
    if (done(r)) return r;
    await feed(r);
    await controller.tick();
    await Bun.sleep(150);
  }
  throw new Error(`not reached: ${JSON.stringify((await record()).log.at(-1))} / ${controller.status().note}`);
}

const healthy = (canary: string, stable: string) => async (r: Rollout) => {
  const region = r.plan.regions[r.region]!;
  for (const [w, v] of [
    [`${region}-a`, stable],
    [`${region}-b`, canary],
  ] as const)
    await beat(region, w, v, 100 + (Math.floor(Date.now() / 100) % 1000));
  if (r.applied) {
    await tasks(region, canary, 3, { state: "completed" });
    await tasks(region, stable, 3, { state: "completed" });
  }
};

describe("a rollout across two regions", () => {
  test("v2 goes 50% then 100% in ra, then in rb; every step applied before the next; promoted", async () => {
    for (const r of REGIONS)
      for (const [w, v] of [
        [`${r}-a`, "v1"],
        [`${r}-b`, "v2"],
      ] as const)
        await beat(r, w, v, 100);
    const s = await cli("start", "v2", "--steps", "50,100", "--bake", "1s", "--gate", "minTasks=5");
    expect(s.code).toBe(0);
    expect(s.out).toContain("v2 replaces v1 in ra then rb, steps 50/100%");
    // A second start while one runs is refused.
    expect((await cli("start", "v3")).code).toBe(3);
    const r = await tickUntil((x) => x.state === "promoted" && x.applied, healthy("v2", "v1"));
    expect(r.log.map((e) => `${e.action}${e.region ? ` ${e.region}` : ""}${e.percent ? ` ${e.percent}` : ""}`)).toEqual(
      [
        "start",
        "applied",
        "shift ra 100",
        "applied",
        "shift rb 50",
        "applied",
        "shift rb 100",
        "applied",
        "done",
        "applied",
      ],
    );
    expect(await share("ra")).toEqual({ v2: 16 });
    expect(await share("rb")).toEqual({ v2: 16 });
    // Every decision carries the gate figures that made it.
    expect(r.log.find((e) => e.action === "shift")!.figures).toMatchObject({
      canary: { failed: 0 },
      stable: { failed: 0 },
    });
    const audit = await db.sql<{ action: string }[]>`select action from audit_log order by id`;
    expect(audit.map((a) => a.action)).toContain("rollout.done");
    expect(audit[0]!.action).toBe("rollout.start");
    const ev = await (await jetstreamManager(admin)).streams.getMessage(streams.events("rb"), {
      last_by_subj: eventSubject("rb", "rollout"),
    });
    expect(ev!.json<{ kind: string; data: { action: string } }>()).toMatchObject({
      kind: "rollout",
      data: { action: "applied" },
    });
    const h = await cli("history");
    expect(h.out).toContain("shift rb 50%");
    expect(h.out).toMatch(/canary \d+ tasks, 0 troubled/);
  }, 60_000);

  test("a canary whose tasks fail is rolled back in every region at the first gate, saying why", async () => {
    expect((await cli("start", "v3", "--steps", "25,100", "--bake", "1s", "--gate", "minTasks=5")).code).toBe(0);
    const r = await tickUntil(
      (x) => x.state === "rolledBack" && x.applied,
      async (x) => {
        await beat("ra", "ra-a", "v2", 500);
        await beat("ra", "ra-c", "v3", 50, 50);
        if (x.applied) {
          await tasks("ra", "v3", 6, { state: "retrying", attempts: 1, errorCode: "TRANSPORT", submissions: 0 });
          await tasks("ra", "v2", 6, { state: "completed" });
        }
      },
    );
    expect(r.reason).toMatch(/^gate failed in ra at 25%: task failure rate 100\.0% vs stable 0\.0%/);
    expect(await share("ra")).toEqual({ v2: 16 });
    expect(await share("rb")).toEqual({ v2: 16 });
    expect((await cli("status")).out).toContain("rolledBack");
  }, 60_000);

  test("a service killed between a decision and its move finishes the move when it comes back", async () => {
    const cur = (await store.read())!;
    // What a service writes before it moves shards: v3 at 50% in ra, not applied.
    const decided = withLog(
      {
        ...cur.record,
        id: "killed",
        plan: { ...cur.record.plan, steps: [50, 100] },
        state: "running",
        region: 0,
        step: 0,
        stepStartedAt: Date.now(),
        applied: false,
        reason: undefined,
      },
      { action: "shift", region: "ra", percent: 50, why: "test" },
      new Date(),
    );
    expect(await store.write(decided, cur.revision)).toBeDefined();
    const fresh = createController({
      store,
      regions: links,
      home: links.get("ra")!,
      ackWaitMs: 30_000,
      now: Date.now,
      log,
    });
    await beat("ra", "ra-c", "v3", 0);
    await fresh.tick();
    expect(await share("ra")).toEqual({ v3: 8, v2: 8 });
    expect((await record()).applied).toBe(true);
    // Run again: nothing more moves.
    await fresh.tick();
    expect(await share("ra")).toEqual({ v3: 8, v2: 8 });
  }, 30_000);

  test("pause holds the step; abort gives every region back to the stable version; ended rollouts refuse commands", async () => {
    expect((await cli("pause")).code).toBe(0);
    await controller.tick();
    expect((await record()).state).toBe("paused");
    expect((await cli("pause")).out).toContain("refused: already paused");
    expect((await cli("resume")).code).toBe(0);
    expect((await cli("abort")).code).toBe(0);
    await controller.tick();
    expect(await record()).toMatchObject({ state: "aborted", applied: true });
    expect(await share("ra")).toEqual({ v2: 16 });
    expect((await cli("resume")).code).toBe(3);
    const st = JSON.parse((await cli("status", "--json")).out) as {
      rollout: Rollout;
      regions: Record<string, { share: Record<string, number> }>;
    };
    expect(st.rollout.state).toBe("aborted");
    expect(st.regions.rb!.share).toEqual({ v2: 16 });
  }, 30_000);

  test("a canary with no process anywhere is not given work", async () => {
    expect((await cli("start", "v9", "--steps", "100", "--bake", "1s")).code).toBe(0);
    await controller.tick();
    expect(controller.status().note).toContain("waiting: no v9 process in ra");
    expect(await share("ra")).toEqual({ v2: 16 });
    expect((await cli("abort")).code).toBe(0);
  }, 30_000);

  test("the status and metrics the service serves: promtool accepts them, the shares and verdicts are there", async () => {
    const metrics = createRolloutMetrics(controller.status);
    metrics.verdict("ra", { pass: false, why: "x" });
    await controller.tick();
    const text = await (await metrics.response()).text();
    expect(text).toContain('rollout_shard_share{region="ra",version="v2",app="rollout"} 16');
    expect(text).toContain('rollout_gate_verdicts_total{region="ra",verdict="fail",app="rollout"} 1');
    expect(text).toMatch(/rollout_state\{state="aborted",app="rollout"\} 1/);
    const r = spawnSync(findPromtool(), ["check", "metrics"], { input: text, encoding: "utf8" });
    expect(`${r.stdout}${r.stderr}`.trim()).toBe("");
    expect(r.status).toBe(0);
  }, 60_000);

  test("a canary that never comes up is rolled back at the progress deadline, and the rollback carried out in the same tick", async () => {
    expect((await cli("start", "v8", "--steps", "100", "--bake", "1s", "--deadline", "1s")).code).toBe(0);
    await Bun.sleep(1100);
    await controller.tick();
    const r = await record();
    expect(r).toMatchObject({
      state: "rolledBack",
      applied: true,
      reason: "no v8 process in ra (heartbeats) within 1000 ms",
    });
    expect(r.log.map((e) => e.action)).toEqual(["start", "rollback", "applied"]);
    expect(await share("ra")).toEqual({ v2: 16 });
  }, 30_000);

  test("bad arguments change nothing", async () => {
    const before = (await store.read())!.revision;
    expect((await cli("start", "v4", "--steps", "50,10")).code).toBe(2);
    expect((await cli("start")).code).toBe(2);
    expect((await cli("frobnicate")).code).toBe(2);
    expect((await store.read())!.revision).toBe(before);
  }, 30_000);
});

describe("pause steps, inconclusive steps and the notify hook", () => {
  const told: Notice[] = [];
  let notifying: Controller;
  const feed =
    (tasksEach: number) =>
    async (r: Rollout): Promise<void> => {
      await beat("ra", "ra-s", "v2", 100 + (Math.floor(Date.now() / 100) % 1000));
      await beat("ra", "ra-k", "v3", 100 + (Math.floor(Date.now() / 100) % 1000));
      if (r.applied && tasksEach) {
        await tasks("ra", "v3", tasksEach, { state: "completed" });
        await tasks("ra", "v2", tasksEach, { state: "completed" });
      }
    };
  const tickUntilWith = async (done: (r: Rollout) => boolean, f: (r: Rollout) => Promise<void>) => {
    for (let i = 0; i < 40; i++) {
      const r = await record();
      if (done(r)) return r;
      await f(r);
      await notifying.tick();
      await Bun.sleep(150);
    }
    throw new Error(`not reached: ${JSON.stringify((await record()).log.at(-1))} / ${notifying.status().note}`);
  };

  beforeAll(async () => {
    // The earlier tests' solvers stop cleanly (a delete, not a lost process).
    for (const r of REGIONS) for await (const k of await workers[r]!.keys()) await workers[r]!.delete(k);
    notifying = createController({
      store,
      regions: links,
      home: links.get("ra")!,
      ackWaitMs: 30_000,
      now: Date.now,
      log,
      notify: (x) => told.push(x),
    });
  });

  test("a pause step holds the share until promote; promote goes on to the next step; each event told once", async () => {
    await feed(0)(await record());
    const s = await cli(
      "start",
      "v3",
      "--steps",
      "50,pause,100",
      "--regions",
      "ra",
      "--bake",
      "1s",
      "--gate",
      "minTasks=5",
    );
    expect(s.out).toContain("steps 50/pause/100%");
    const waiting = await tickUntilWith((x) => x.state === "paused", feed(3));
    expect(waiting).toMatchObject({
      awaiting: "promotion",
      step: 1,
      applied: true,
      reason: "waiting for promotion after 50% in ra",
    });
    // Well past its bake and its deadline (10 min by default, not reached here), it only waits.
    for (let i = 0; i < 5; i++) {
      await feed(3)(await record());
      await notifying.tick();
    }
    expect(await record()).toMatchObject({ state: "paused", awaiting: "promotion" });
    expect(await share("ra")).toEqual({ v3: 8, v2: 8 });
    expect((await cli("status")).out).toContain("paused at 50% in ra (pause step: promote goes on)");
    expect((await cli("resume")).out).toContain("refused: it waits at a pause step");
    expect((await cli("promote", "--fast")).code).toBe(2);
    expect(told.map((x) => x.kind)).toEqual(["awaiting_promotion"]);
    expect(told[0]!.key).toBe(`rollout:${waiting.id}:awaiting_promotion:ra.1.${waiting.stepStartedAt}`);
    // A service started afresh does not tell it again (the key is in the record).
    const again: Notice[] = [];
    await createController({
      store,
      regions: links,
      home: links.get("ra")!,
      ackWaitMs: 30_000,
      now: Date.now,
      log,
      notify: (x) => again.push(x),
    }).tick();
    expect(again).toEqual([]);

    expect((await cli("promote")).code).toBe(0);
    const done = await tickUntilWith((x) => x.state === "promoted" && x.applied, feed(3));
    expect(await share("ra")).toEqual({ v3: 16 });
    expect(done.log.map((e) => e.action)).toEqual([
      "start",
      "applied",
      "await",
      "promote",
      "applied",
      "done",
      "applied",
    ]);
    await notifying.tick();
    await notifying.tick();
    expect(told.map((x) => x.kind)).toEqual(["awaiting_promotion", "promoted"]);
    const audit = await db.sql<{ action: string }[]>`select action from audit_log order by id desc limit 8`;
    expect(audit.map((a) => a.action)).toContain("rollout.await");
    expect(audit.map((a) => a.action)).toContain("rollout.promote");
  }, 60_000);

  test("too little traffic by the deadline pauses (inconclusive) instead of rolling back; told once", async () => {
    told.length = 0;
    const s = await cli(
      "start",
      "v2",
      "--steps",
      "100",
      "--regions",
      "ra",
      "--bake",
      "1s",
      "--deadline",
      "2s",
      "--gate",
      "minTasks=50",
    );
    expect(s.code).toBe(0);
    const held = await tickUntilWith(
      (x) => x.state === "paused",
      async (r) => {
        await beat("ra", "ra-s", "v3", 100 + (Math.floor(Date.now() / 100) % 1000));
        await beat("ra", "ra-k", "v2", 100 + (Math.floor(Date.now() / 100) % 1000));
        if (r.applied) await tasks("ra", "v2", 1, { state: "completed" });
      },
    );
    expect(held.awaiting).toBe("decision");
    expect(held.reason).toMatch(/^inconclusive: too little traffic \(\d+ tasks, need 50\) in ra at 100%$/);
    expect(held.log.at(-1)).toMatchObject({ action: "inconclusive", region: "ra" });
    expect(held.log.at(-1)!.figures).toMatchObject({ canary: { tasks: expect.any(Number) } });
    expect(await share("ra")).toEqual({ v2: 16 });
    for (let i = 0; i < 3; i++) await notifying.tick();
    expect(await record()).toMatchObject({ state: "paused" });
    expect(told.map((x) => `${x.kind} ${x.title}`)).toEqual([
      `inconclusive Rollout ${held.id} (v2 replacing v3) paused: inconclusive in ra at 100%`,
    ]);
    expect(told[0]!.text).toContain("last gate: canary");
    // Abort: the shards go back to the stable version, and that is told once too.
    expect((await cli("abort")).code).toBe(0);
    await notifying.tick();
    await notifying.tick();
    await notifying.tick();
    expect(await share("ra")).toEqual({ v3: 16 });
    expect(told.map((x) => x.kind)).toEqual(["inconclusive", "aborted"]);
  }, 60_000);
});
