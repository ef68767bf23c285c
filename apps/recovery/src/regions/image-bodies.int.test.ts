// The other region's replica of an image task, its body no longer in EVENTS (docs/security.md,
// "Image bodies"): two NATS servers joined like two regions (each its own JetStream domain, hel1 a
// leafnode of fsn1). fsn1's gateway (its own NATS user) accepts an image task; hel1's replicator
// mirrors fsn1's EVENTS and BODIES, rebuilds the row with its body, and after a takeover hel1
// adopts it: home moved, queued in hel1's TASKS, body in the row a hel1 solver reads. An accepted
// event whose body never reached BODIES is rebuilt failed (BODY_UNAVAILABLE) and not adopted.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { freePort, type NatsServerHandle, waitForPort } from "@pipeline/devstack";
import { gatewayEnv, startRegionPair, testServers } from "@pipeline/devstack/stack";
import { createTestDatabase, eventually, type Proc, spawnApp, type TestDatabase } from "@pipeline/devstack/testing";
import { type Database, openDatabase } from "@pipeline/shared/db";
import { createLogger } from "@pipeline/shared/log";
import { connectNats, ensureStreams, type NatsConnection } from "@pipeline/shared/nats";
import { provisionRegion } from "@pipeline/shared/provision";
import { eventSubject, streams } from "@pipeline/shared/subjects";
import { splitBodies } from "@pipeline/shared/tasks";
import postgres from "postgres";
import { adoptRegion } from "./adopt.ts";
import { type Replicator, startReplicator } from "./replicator.ts";

const log = createLogger("region-image-bodies", { level: "silent" });
const servers = testServers();
let fsn1: NatsServerHandle;
let hel1: NatsServerHandle;
let dbA: TestDatabase;
let dbB: TestDatabase;
let databaseA: Database;
let sqlB: postgres.Sql;
let adminA: NatsConnection;
let ncB: NatsConnection;
let replicator: Replicator | undefined;
let gateway: Proc | undefined;

beforeAll(async () => {
  ({ first: fsn1, second: hel1 } = await startRegionPair(servers, ["fsn1", "hel1"]));
  [dbA, dbB] = await Promise.all([createTestDatabase("imgb_fsn1"), createTestDatabase("imgb_hel1")]);
  databaseA = openDatabase(dbA.url, { max: 3 });
  sqlB = postgres(dbB.url, { max: 2, onnotice: () => {} });
  adminA = await connectNats(fsn1.url, "imgb-fsn1-admin", fsn1.auth("admin"));
  // fsn1's topology as its recovery service makes it (BODIES too: the gateway's user may not create it).
  await provisionRegion(adminA, { region: "fsn1" });
  ncB = await connectNats(hel1.url, "imgb-hel1-recovery", hel1.auth("recovery"));
  await ensureStreams(await jetstreamManager(ncB), { region: "hel1" });
}, 60_000);

afterAll(async () => {
  await gateway?.kill("SIGTERM");
  await replicator?.stop().catch(() => {});
  for (const nc of [adminA, ncB]) await nc?.close().catch(() => {});
  await databaseA?.close().catch(() => {});
  await sqlB?.end({ timeout: 5 });
  for (const d of [dbA, dbB]) await d?.drop().catch(() => {});
  await hel1?.stop().catch(() => {});
  await fsn1?.stop();
  await servers.stop();
});

test("hel1's replica of an fsn1 image task carries its body (from the mirrored BODIES) and is adopted with it; one whose body never arrived is failed, not adopted", async () => {
  // fsn1's gateway, a real process with its own NATS user and database login (a single-region
  // gateway: no fence to wait for; fsn1 is the first region either way, so the id's home byte is fsn1's).
  const port = await freePort();
  const wiring = {
    region: "fsn1",
    regions: ["fsn1"],
    nats: fsn1,
    database: dbA,
    provider: { url: "http://127.0.0.1:9", key: "unused" },
    profile: "test" as const,
  };
  gateway = spawnApp(
    "gateway-fsn1",
    "apps/gateway/src/main.ts",
    gatewayEnv(wiring, { port, apiKeys: "region-client-key" }),
    mkdtempSync(join(tmpdir(), "imgb-logs-")),
  );
  await waitForPort(port, 20_000);
  const params = { body: Buffer.from("a screenshot from fsn1").toString("base64"), numeric: 1 };
  const res = await fetch(`http://127.0.0.1:${port}/v1/tasks`, {
    method: "POST",
    headers: { authorization: "Bearer region-client-key", "content-type": "application/json" },
    body: JSON.stringify({ type: "image", params }),
  });
  expect(res.status).toBe(202);
  const { id } = (await res.json()) as { id: string };
  // An accepted event whose body never reached BODIES (published by hand: the gateway refuses such a task).
  const lost = crypto.randomUUID();
  const split = splitBodies("image", { body: Buffer.from("never stored").toString("base64") });
  const [row] = await databaseA.sql<
    { owner: string; request_hash: string }[]
  >`select owner, request_hash from tasks where id = ${id}`;
  await jetstream(adminA).publish(
    eventSubject("fsn1", "accepted"),
    JSON.stringify({
      taskId: lost,
      kind: "accepted",
      state: "queued",
      version: 0,
      region: "fsn1",
      at: new Date().toISOString(),
      data: {
        owner: row!.owner,
        type: "image",
        priority: "normal",
        params: split.params,
        bodies: split.refs,
        requestHash: row!.request_hash,
      },
    }),
  );

  replicator = await startReplicator({
    js: jetstream(ncB),
    jsm: await jetstreamManager(ncB),
    sql: sqlB,
    local: "hel1",
    remote: "fsn1",
    log,
    retryMs: 200,
    bodyGraceMs: 1000,
  });
  const replicated = await eventually(
    async () => {
      const rows = await sqlB<
        { id: string; region: string; state: string; params: Record<string, unknown>; error_code: string | null }[]
      >`select id, region, state, params, error_code from tasks`;
      return rows.length === 2 ? new Map(rows.map((r) => [r.id, r])) : undefined;
    },
    30_000,
    100,
  );
  expect(replicated.get(id)).toMatchObject({ region: "fsn1", state: "queued", params, error_code: null });
  expect(replicated.get(lost)).toMatchObject({
    region: "fsn1",
    state: "failed",
    params: {},
    error_code: "BODY_UNAVAILABLE",
  });
  expect(replicator.counts()).toMatchObject({ inserted: 1, bodyUnavailable: 1 });

  // fsn1 is lost; hel1 took its lease over and adopts its unfinished tasks.
  const report = await adoptRegion(
    { sql: sqlB, js: jetstream(ncB), local: "hel1", log, publishDeadlineMs: 5000 },
    "fsn1",
    2,
    "all",
  );
  expect(report.adopted).toBe(1);
  const [adopted] = await sqlB<
    { region: string; state: string; params: Record<string, unknown> }[]
  >`select region, state, params from tasks where id = ${id}`;
  expect(adopted).toMatchObject({ region: "hel1", state: "queued", params });
  const info = await (await jetstreamManager(ncB)).streams.info(streams.tasks("hel1"));
  expect(info.state.messages).toBe(1);
  const [still] = await sqlB<{ region: string; state: string }[]>`select region, state from tasks where id = ${lost}`;
  expect(still).toEqual({ region: "fsn1", state: "failed" });
}, 90_000);
