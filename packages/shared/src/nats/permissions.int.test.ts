// Authentication and per-app permissions against a real nats-server started by the project.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { connect } from "@nats-io/transport-node";
import { buckets, openConfigBucket, openWorkersBucket } from "../runtime/kv.ts";
import { streams, taskSubject } from "../subjects.ts";
import { startTestNats, type TestNats } from "../testing/index.ts";
import { connectNats, type NatsConnection } from "./connection.ts";
import { ensureLaneConsumers, ensureStreams } from "./topology.ts";

const REGION = "perm";
let nats: TestNats;
let admin: NatsConnection;
const opened: NatsConnection[] = [];
const errors: string[] = [];
const as = async (role: "gateway" | "solver" | "recovery") => {
  const nc = await connectNats(nats.url, `perm-${role}`, nats.auth(role), (e) => errors.push(`${role}: ${e.message}`));
  opened.push(nc);
  return nc;
};

beforeAll(async () => {
  nats = await startTestNats({ regions: [REGION] });
  admin = await connectNats(nats.url, "perm-admin", nats.auth("admin"));
  const jsm = await jetstreamManager(admin);
  await ensureStreams(jsm, { region: REGION });
  await ensureLaneConsumers(jsm, { region: REGION, version: "v1", ackWaitMs: 30_000 });
  await (await openConfigBucket(admin, REGION)).put("solver", "{}");
});
afterAll(async () => {
  for (const nc of opened) await nc.close().catch(() => {});
  await admin.close();
  await nats.dispose();
});

test("a client without credentials, or with a wrong password, is refused", async () => {
  await expect(connect({ servers: nats.url, reconnect: false, timeout: 2000 })).rejects.toThrow(/Authorization/i);
  await expect(connect({ servers: nats.url, reconnect: false, timeout: 2000, user: "solver", pass: "not-the-password" })).rejects.toThrow(/Authorization/i);
});

test("credentials are kept in 0600 files, never in the URL", () => {
  expect(nats.url).toBe(`nats://127.0.0.1:${nats.port}`);
  expect(statSync(nats.credentialsFile).mode & 0o777).toBe(0o600);
  const conf = join(nats.credentialsFile, "..", "nats-server.conf");
  expect(statSync(conf).mode & 0o777).toBe(0o600);
  // The server's config holds bcrypt hashes, not the passwords.
  expect(readFileSync(conf, "utf8")).not.toContain(nats.auth("solver").pass!);
});

test("the gateway's user publishes tasks but cannot consume them", async () => {
  const nc = await as("gateway");
  const js = jetstream(nc);
  const ack = await js.publish(taskSubject(REGION, "normal", 0), "{}");
  expect(ack.stream).toBe(streams.tasks(REGION));
  const c = await js.consumers.get(streams.tasks(REGION), `solver_${REGION}_normal_v1`).catch((e: Error) => e);
  const next = c instanceof Error ? c : await c.next({ expires: 1000 }).catch((e: Error) => e);
  expect(next).toBeInstanceOf(Error);
  expect(String(next)).toMatch(/permission|timeout|no responders/i);
  // and it cannot make a consumer of its own either
  const jsm = await jetstreamManager(nc);
  await expect(jsm.consumers.add(streams.tasks(REGION), { durable_name: "sneaky", ack_policy: "explicit" as never })).rejects.toThrow();
});

test("the solver's user cannot delete or purge a stream, nor write the config bucket", async () => {
  const nc = await as("solver");
  const jsm = await jetstreamManager(nc);
  await expect(jsm.streams.delete(streams.tasks(REGION))).rejects.toThrow();
  await expect(jsm.streams.purge(streams.events(REGION))).rejects.toThrow();
  const config = await new Kvm(nc).open(buckets.config(REGION));
  expect((await config.get("solver"))?.string()).toBe("{}"); // it reads the config...
  await expect(config.put("solver", '{"evil":true}')).rejects.toThrow(); // ...and cannot change it
  // ...but it writes its own heartbeat
  const workers = await openWorkersBucket(nc, REGION);
  await workers.put("w1", "{}");
  // the streams are still there, the config unchanged
  const adminJsm = await jetstreamManager(admin);
  expect((await adminJsm.streams.info(streams.tasks(REGION))).config.name).toBe(streams.tasks(REGION));
  expect((await (await openConfigBucket(admin, REGION)).get("solver"))?.string()).toBe("{}");
  expect(errors.some((e) => /solver: .*Permissions Violation/i.test(e))).toBe(true);
});

test("an app's user is confined to its region's subjects", async () => {
  const nc = await as("solver");
  const js = jetstream(nc);
  await expect(js.publish("tasks.other.normal.0", "{}", { timeout: 1000 })).rejects.toThrow();
});

test("recovery administers streams", async () => {
  const nc = await as("recovery");
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: "SCRATCH", subjects: ["scratch.>"] });
  await jsm.streams.delete("SCRATCH");
});

test("error reports carry no credential", () => {
  for (const role of ["gateway", "solver", "recovery"] as const) {
    for (const e of errors) expect(e).not.toContain(nats.auth(role).pass!);
  }
});
