// The recovery service's own loop, as a process with short intervals: its stale sweep picks up
// an orphaned row by itself, its snapshots are taken on schedule and pruned to SNAPSHOT_KEEP.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { natsEnv } from "@pipeline/devstack";
import { eventually } from "@pipeline/devstack/testing";
import { type Proc, type Stack, spawnApp, startStack } from "./harness.ts";

const region = "rservice";
let s: Stack;
let recovery: Proc;
const snapshots = mkdtempSync(join(tmpdir(), "recovery-service-"));

beforeAll(async () => {
  s = await startStack({ region, solvers: 1, emulator: { latencyMs: 100 } });
  recovery = spawnApp(
    "recovery",
    "apps/recovery/src/main.ts",
    {
      NATS_URL: s.nats.url,
      ...natsEnv(s.nats, "recovery"),
      DATABASE_URL: s.tdb.url,
      REGION: region,
      LOG_LEVEL: "info",
      SNAPSHOT_DIR: snapshots,
      SNAPSHOT_INTERVAL_MS: "1500",
      SNAPSHOT_KEEP: "2",
      SWEEP_INTERVAL_MS: "1000",
      STALE_AFTER_MS: "1000",
    },
    s.logDir,
  );
}, 60_000);
afterAll(async () => {
  await recovery?.kill("SIGTERM");
  await s?.stop();
});

test("the service sweeps an orphaned row by itself, and takes snapshots on schedule, keeping SNAPSHOT_KEEP", async () => {
  const id = crypto.randomUUID();
  // A worker claimed it, then died after its message was gone (the state a lost queue leaves).
  await s.db.sql`
    insert into tasks (id, owner, request_hash, region, type, priority, params, state, version, attempts, lease_owner, lease_until, deadline_at, created_at, updated_at)
    values (${id}, 'owner-service', 'hash', ${region}, 'turnstile', 'normal', ${JSON.stringify({ sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com/service" })}::text::jsonb,
            'solving', 1, 1, 'dead-worker', now() - interval '1 minute', now() + interval '10 minutes', now() - interval '2 minutes', now() - interval '2 minutes')`;
  const row = await eventually(
    async () => {
      const [r] = await s.db.sql<
        { state: string; token: string | null }[]
      >`select state, token from tasks where id = ${id}`;
      return r?.state === "completed" ? r : undefined;
    },
    20_000,
    100,
  );
  expect(row.token).toBeTruthy();
  expect(s.emu.stats().submissions).toBe(1);
  // Several intervals pass: snapshots keep being taken, and only the newest two are kept.
  const manifests = () =>
    readdirSync(snapshots)
      .filter((f) => /^snap-.*\.json$/.test(f))
      .sort();
  const first = await eventually(() => (manifests().length >= 1 ? manifests()[0] : undefined), 20_000, 100);
  await eventually(() => manifests().length === 2 && !manifests().includes(first!) && manifests(), 30_000, 200);
  const dumps = readdirSync(snapshots).filter((f) => f.endsWith(".dump"));
  expect(dumps.length).toBe(2);
  expect(recovery.log()).toContain("stale sweep");
  expect(recovery.exitCode()).toBeUndefined();
}, 90_000);
