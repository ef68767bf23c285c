import { describe, expect, test } from "bun:test";
import type { Heartbeat } from "@pipeline/shared/kv";
import type { Snapshot } from "../snapshot/manifest.ts";
import {
  breakerCheck,
  dlqCheck,
  natsChecks,
  natsServerCheck,
  newestSnapshot,
  offHostCheck,
  overallLevel,
  postgresChecks,
  providerCheck,
  queueCheck,
  snapshotCheck,
  workersChecks,
} from "./checks.ts";
import type { LaneInfo } from "./model.ts";
import type { JetStreamProbe, PostgresProbe, SnapshotsProbe } from "./probes.ts";

const lane = (consumer: string, o: Partial<LaneInfo> = {}): LaneInfo => ({
  consumer,
  filter: "",
  pending: 0,
  ackPending: 0,
  redelivered: 0,
  waitingPulls: 1,
  ...o,
});
const levels = (cs: Array<{ name: string; level: string }>) => cs.map((c) => [c.name, c.level]);

describe("nats", () => {
  test("a server at least 2.14 is ok, an older one warns", () => {
    expect(natsServerCheck({ version: "2.14.1", url: "nats://x" })).toMatchObject({
      level: "ok",
      summary: "nats-server 2.14.1 at nats://x",
    });
    expect(natsServerCheck({ version: "2.10.22", url: "nats://x" })).toMatchObject({
      level: "warn",
      summary: expect.stringContaining("older than 2.14.0"),
    });
  });

  test("NATS unreachable fails and says nothing else about it", () => {
    expect(natsChecks(new Error("no NATS"), { version: "2.14.0", url: "nats://x" })).toEqual([
      {
        name: "nats",
        level: "fail",
        summary: "NATS unreachable: no NATS",
        hint: "start nats-server; the apps reconnect by themselves",
      },
    ]);
  });

  test("a JetStream error fails after what was read before it", () => {
    const p: JetStreamProbe = {
      queue: { stream: "TASKS_r1", exists: true, messages: 0, lanes: [lane("c_r1_fast")] },
      dlq: null,
      breaker: null,
      error: "timeout",
    };
    expect(levels(natsChecks(p))).toEqual([
      ["queue", "ok"],
      ["queue", "fail"],
    ]);
    expect(natsChecks({ queue: null, dlq: null, breaker: null, error: "boom" })).toEqual([
      { name: "queue", level: "fail", summary: "JetStream error: boom" },
    ]);
  });
});

describe("queue", () => {
  test("a lost TASKS stream fails", () => {
    expect(queueCheck({ stream: "TASKS_r1", exists: false, messages: 0, lanes: [] })).toMatchObject({
      level: "fail",
      summary: "TASKS_r1 does not exist: queue lost",
    });
  });
  test("no consumer fails with messages waiting, warns without", () => {
    expect(queueCheck({ stream: "TASKS_r1", exists: true, messages: 3, lanes: [] }).level).toBe("fail");
    expect(queueCheck({ stream: "TASKS_r1", exists: true, messages: 0, lanes: [] }).level).toBe("warn");
  });
  test("a lane with pending messages and nobody pulling fails", () => {
    const c = queueCheck({
      stream: "TASKS_r1",
      exists: true,
      messages: 4,
      lanes: [lane("c_r1_fast"), lane("c_r1_slow", { pending: 4, waitingPulls: 0 })],
    });
    expect(c).toMatchObject({ level: "fail", summary: "nobody pulls c_r1_slow (4 waiting)" });
  });
  test("pulled lanes are ok and show their lag", () => {
    expect(
      queueCheck({
        stream: "TASKS_r1",
        exists: true,
        messages: 2,
        lanes: [lane("c_r1_fast", { pending: 2 }), lane("solo")],
      }),
    ).toEqual({ name: "queue", level: "ok", summary: "2 messages; lag fast=2 solo=0" });
  });
});

describe("dlq and breaker", () => {
  test("an empty DLQ is ok, a dead letter warns", () => {
    expect(dlqCheck({ stream: "DLQ_r1", messages: 0 }).level).toBe("ok");
    expect(dlqCheck({ stream: "DLQ_r1", messages: 2 })).toMatchObject({ level: "warn", summary: "2 dead-lettered" });
  });
  test("an open breaker warns; a closed one says nothing", () => {
    expect(breakerCheck({ state: "open", reason: "ERROR_KEY", worker: "w1", at: "t" })).toMatchObject({
      level: "warn",
      summary: "last breaker event: open (ERROR_KEY) on w1 at t",
    });
    expect(breakerCheck({ state: "closed", reason: null, worker: "w1", at: "t" })).toBeUndefined();
  });
});

describe("postgres", () => {
  const probe = (o: Partial<PostgresProbe> = {}): PostgresProbe => ({
    server: { version: "16.2" },
    tasks: {
      byState: { queued: 2, completed: 5 },
      stuckSolving: 0,
      oldestStuckSolvingSec: null,
      staleQueued: 0,
      oldestQueuedSec: null,
    },
    stuckOld: 0,
    error: null,
    ...o,
  });

  test("unreachable fails", () => {
    expect(postgresChecks(new Error("ECONNREFUSED"), 60_000)).toMatchObject([
      { name: "postgres", level: "fail", summary: "Postgres unreachable: ECONNREFUSED" },
    ]);
  });
  test("reachable with tasks by state is ok", () => {
    expect(postgresChecks(probe(), 60_000)).toEqual([
      { name: "postgres", level: "ok", summary: "PostgreSQL 16.2 reachable" },
      { name: "tasks", level: "ok", summary: "queued=2 completed=5" },
    ]);
    expect(
      postgresChecks(
        probe({
          server: { version: null },
          tasks: { byState: {}, stuckSolving: 0, oldestStuckSolvingSec: null, staleQueued: 0, oldestQueuedSec: null },
        }),
        1,
      ).map((c) => c.summary),
    ).toEqual(["PostgreSQL ? reachable", "none"]);
  });
  test("solving rows with an expired lease warn, and fail once older than the stale limit", () => {
    const t = {
      byState: { solving: 2 },
      stuckSolving: 2,
      oldestStuckSolvingSec: 12.4,
      staleQueued: 0,
      oldestQueuedSec: null,
    };
    expect(postgresChecks(probe({ tasks: t }), 60_000)[2]).toMatchObject({
      name: "stuck",
      level: "warn",
      summary: "2 solving with an expired lease (oldest updated 12 s ago)",
    });
    expect(postgresChecks(probe({ tasks: t, stuckOld: 1 }), 60_000)[2]).toMatchObject({ name: "stuck", level: "fail" });
  });
  test("stale queued rows warn", () => {
    const t = {
      byState: { queued: 1 },
      stuckSolving: 0,
      oldestStuckSolvingSec: null,
      staleQueued: 1,
      oldestQueuedSec: 90,
    };
    expect(postgresChecks(probe({ tasks: t }), 60_000)[2]).toMatchObject({
      name: "stale",
      level: "warn",
      summary: "1 queued/retrying not updated for 60 s (oldest queued 90 s)",
    });
  });
  test("a failed query fails after what was read before it", () => {
    expect(levels(postgresChecks(probe({ tasks: null, error: 'relation "tasks" does not exist' }), 60_000))).toEqual([
      ["postgres", "ok"],
      ["postgres", "fail"],
    ]);
  });
});

describe("snapshots", () => {
  const now = Date.parse("2026-01-01T12:00:00Z");
  const snap = (name: string, createdAt: string) => ({ manifest: { name, createdAt } }) as unknown as Snapshot;
  const probe = (snapshots: Snapshot[], copied?: Snapshot): SnapshotsProbe => ({
    dir: "/snaps",
    snapshots,
    copied,
    now,
  });
  const fresh = snap("snap-b", "2026-01-01T11:59:30Z");
  const old = snap("snap-a", "2026-01-01T10:00:00Z");

  test("none warns, a fresh one is ok, one older than the limit fails", () => {
    expect(snapshotCheck(probe([]), 3_600_000)).toMatchObject({ level: "warn", summary: "no snapshot in /snaps" });
    expect(snapshotCheck(probe([fresh, old]), 3_600_000)).toMatchObject({ level: "ok", summary: "snap-b, 30 s old" });
    expect(snapshotCheck(probe([old]), 3_600_000)).toMatchObject({
      level: "fail",
      summary: "newest snapshot is 120 min old (snap-a)",
    });
    expect(newestSnapshot(probe([fresh, old]))).toEqual({ name: "snap-b", ageSec: 30 });
    expect(newestSnapshot(probe([]))).toBeNull();
  });

  test("off-host: nothing without a snapshot; copies off warn", () => {
    expect(offHostCheck(probe([]), 3_600_000, undefined)).toBeUndefined();
    expect(offHostCheck(probe([fresh]), 3_600_000, undefined)).toMatchObject({
      level: "warn",
      summary: expect.stringContaining("SNAPSHOT_OFFHOST is none"),
    });
  });
  test("off-host: no verified copy, or only an old one, fails", () => {
    expect(offHostCheck(probe([fresh]), 3_600_000, "hel1")).toMatchObject({
      level: "fail",
      summary: "no snapshot has a verified copy in hel1",
    });
    expect(offHostCheck(probe([old], old), 3_600_000, "hel1")).toMatchObject({
      level: "fail",
      summary: "newest snapshot with a verified copy in hel1 is 120 min old (snap-a)",
    });
  });
  test("off-host: the newest not copied yet warns; the newest copied is ok", () => {
    const older = snap("snap-a", "2026-01-01T11:50:00Z");
    expect(offHostCheck(probe([fresh, older], older), 3_600_000, "hel1")).toMatchObject({
      level: "warn",
      summary: "newest snapshot snap-b has no verified off-host copy yet (last copied: snap-a)",
    });
    expect(offHostCheck(probe([fresh, older], fresh), 3_600_000, "hel1")).toEqual({
      name: "offhost",
      level: "ok",
      summary: "snap-b copied to hel1 and verified",
    });
  });
});

describe("provider", () => {
  const p = { url: "http://p", reachable: true, balance: "12.5", error: null };
  test("no key warns (not checked)", () =>
    expect(providerCheck(null)).toMatchObject({ level: "warn", summary: "not checked (PROVIDER_KEY unset)" }));
  test("unreachable, an error code, or no balance fail", () => {
    expect(providerCheck({ ...p, reachable: false, balance: null, error: "timeout" })).toMatchObject({
      level: "fail",
      summary: "http://p unreachable: timeout",
    });
    expect(providerCheck({ ...p, balance: null, error: "ERROR_WRONG_USER_KEY" })).toMatchObject({
      level: "fail",
      summary: "provider answered ERROR_WRONG_USER_KEY",
    });
    expect(providerCheck({ ...p, balance: "0" })).toMatchObject({ level: "fail", summary: "balance 0" });
  });
  test("reachable with a balance is ok", () =>
    expect(providerCheck(p)).toEqual({ name: "provider", level: "ok", summary: "reachable, balance 12.5" }));
});

describe("workers", () => {
  const w = (workerId: string, o: Partial<Heartbeat> = {}): Heartbeat => ({
    workerId,
    pid: 1,
    host: "h",
    version: "v",
    startedAt: "t",
    at: "t",
    inFlight: 0,
    keyName: "main",
    keyRef: "ref",
    breaker: "closed",
    configRevision: 3,
    configRejected: null,
    ...o,
  });

  test("not probed says nothing; unreadable warns; none alive fails", () => {
    expect(workersChecks(undefined)).toEqual([]);
    expect(workersChecks(new Error("no bucket"))).toEqual([
      { name: "workers", level: "warn", summary: "heartbeats unreadable: no bucket" },
    ]);
    expect(workersChecks([])).toMatchObject([{ name: "workers", level: "fail" }]);
  });
  test("solvers on one key and revision are ok", () => {
    expect(workersChecks([w("w1", { inFlight: 2 }), w("w2")])).toEqual([
      {
        name: "workers",
        level: "ok",
        summary: "2 alive: w1 (2 in flight, breaker closed), w2 (0 in flight, breaker closed)",
      },
      { name: "config", level: "ok", summary: "every solver on config rev 3, key main" },
    ]);
  });
  test("a solver refusing a revision warns; solvers that disagree warn", () => {
    expect(levels(workersChecks([w("w1", { configRejected: { revision: 4, error: "bad" } })]))).toEqual([
      ["workers", "ok"],
      ["config", "warn"],
    ]);
    const split = workersChecks([w("w1"), w("w2", { keyName: "spare", configRevision: null })]);
    expect(split[1]).toMatchObject({
      name: "config",
      level: "warn",
      summary: "solvers disagree: keys main, spare; config revisions 3, env",
    });
  });
});

test("the level is the worst check's", () => {
  expect(overallLevel([])).toBe("ok");
  expect(
    overallLevel([
      { name: "a", level: "ok", summary: "" },
      { name: "b", level: "warn", summary: "" },
    ]),
  ).toBe("warn");
  expect(
    overallLevel([
      { name: "a", level: "fail", summary: "" },
      { name: "b", level: "warn", summary: "" },
    ]),
  ).toBe("fail");
});
