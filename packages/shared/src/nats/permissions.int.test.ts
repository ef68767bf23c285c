// Authentication and per-app permissions against a real nats-server started by the project.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { connect } from "@nats-io/transport-node";
import { startTestNats, type TestNats } from "@pipeline/devstack/testing";
import { bindBucket, openConfigBucket } from "../kv/buckets.ts";
import { provisionRegion } from "../provision.ts";
import { ensureVersionConsumers, readAssignment } from "../shards/assignment.ts";
import {
  bodySubject,
  buckets,
  eventSubject,
  hookEventSubject,
  laneConsumer,
  streams,
  taskSubject,
} from "../subjects.ts";
import { connectNats, type NatsConnection } from "./connection.ts";
import {
  ensureLaneConsumers,
  notifierConsumerName,
  notifierHooksConsumerConfig,
  requireStreams,
  TopologyMissingError,
} from "./topology.ts";

const REGION = "perm";
/** A region the servers' permissions cover but nobody has provisioned yet. */
const BARE = "bare";
let nats: TestNats;
let admin: NatsConnection;
const opened: NatsConnection[] = [];
const errors: string[] = [];
const as = async (role: "gateway" | "solver" | "recovery") => {
  const nc = await connectNats(nats.url, `perm-${role}`, nats.auth(role), (e) => errors.push(`${role}: ${e.message}`));
  opened.push(nc);
  return nc;
};

/** Every stream an app user may meet in its region: the queues, the bodies, the KV buckets. */
const regionStreams = () => [
  streams.tasks(REGION),
  streams.events(REGION),
  streams.dlq(REGION),
  streams.bodies(REGION),
  ...[buckets.config(REGION), buckets.workers(REGION), buckets.region(REGION), buckets.rollout(REGION)].map(
    (b) => `KV_${b}`,
  ),
];

/**
 * Sends a raw JetStream API request and says how the server took it: "refused" when the user's
 * permissions stopped it (the server's Permissions Violation, reported on the request), else what
 * came back. A refused request never reaches JetStream, whatever its payload.
 */
async function attempt(nc: NatsConnection, subject: string, payload = "{}"): Promise<string> {
  try {
    const m = await nc.request(subject, payload, { timeout: 5000 });
    return `${subject} answered: ${m.string().slice(0, 120)}`;
  } catch (err) {
    return /permissions violation/i.test((err as Error).message) ? "refused" : `${subject}: ${(err as Error).message}`;
  }
}

/** The subjects of `subjects` the user got through (an empty list: every one was refused). */
async function notRefused(nc: NatsConnection, subjects: string[]): Promise<string[]> {
  const out = await Promise.all(subjects.map((s) => attempt(nc, s)));
  return out.filter((r) => r !== "refused");
}

beforeAll(async () => {
  nats = await startTestNats({ regions: [REGION, BARE] });
  admin = await connectNats(nats.url, "perm-admin", nats.auth("admin"));
  // The administering side's part, before any app: streams, buckets, the notifier's consumers.
  await provisionRegion(admin, { region: REGION });
  await ensureLaneConsumers(await jetstreamManager(admin), { region: REGION, version: "v1", ackWaitMs: 30_000 });
  await (await openConfigBucket(admin, REGION)).put("solver", "{}");
});
afterAll(async () => {
  for (const nc of opened) await nc.close().catch(() => {});
  await admin.close();
  await nats.dispose();
});

test("a client without credentials, or with a wrong password, is refused", async () => {
  await expect(connect({ servers: nats.url, reconnect: false, timeout: 2000 })).rejects.toThrow(/Authorization/i);
  await expect(
    connect({ servers: nats.url, reconnect: false, timeout: 2000, user: "solver", pass: "not-the-password" }),
  ).rejects.toThrow(/Authorization/i);
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
  await expect(
    jsm.consumers.add(streams.tasks(REGION), { durable_name: "sneaky", ack_policy: "explicit" as never }),
  ).rejects.toThrow();
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
  const workers = await new Kvm(nc).open(buckets.workers(REGION));
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

test("neither app's user administers a stream or a KV bucket: every stream-level JetStream API verb is refused on every stream of its region", async () => {
  const verbs = [
    "CREATE",
    "UPDATE",
    "DELETE",
    "PURGE",
    "MSG.DELETE",
    "SNAPSHOT",
    "RESTORE",
    "PEER.REMOVE",
    "LEADER.STEPDOWN",
  ];
  const subjects = regionStreams().flatMap((s) => verbs.map((v) => `$JS.API.STREAM.${v}.${s}`));
  // A bucket of its own making, and the account's and the servers' administration.
  subjects.push(
    `$JS.API.STREAM.CREATE.KV_sneaky`,
    "$JS.API.STREAM.CREATE.SNEAKY",
    "$JS.API.STREAM.LIST",
    "$JS.API.STREAM.NAMES",
  );
  subjects.push(
    "$JS.API.ACCOUNT.PURGE.PIPELINE",
    `$JS.API.ACCOUNT.STREAM.MOVE.${streams.events(REGION)}.PIPELINE`,
    "$JS.API.META.LEADER.STEPDOWN",
    "$JS.API.SERVER.REMOVE",
  );
  for (const role of ["gateway", "solver"] as const)
    expect({ role, got: await notRefused(await as(role), subjects) }).toEqual({ role, got: [] });
});

test("neither app's user creates, changes or deletes a consumer on a stream it has no business with", async () => {
  const consumerVerbs = (s: string) => [
    `$JS.API.CONSUMER.CREATE.${s}`,
    `$JS.API.CONSUMER.CREATE.${s}.sneaky`,
    `$JS.API.CONSUMER.CREATE.${s}.sneaky.x`,
    `$JS.API.CONSUMER.DURABLE.CREATE.${s}.sneaky`,
    `$JS.API.CONSUMER.DELETE.${s}.sneaky`,
    `$JS.API.CONSUMER.PAUSE.${s}.sneaky`,
    `$JS.API.CONSUMER.LEADER.STEPDOWN.${s}.sneaky`,
    `$JS.API.CONSUMER.LIST.${s}`,
    `$JS.API.CONSUMER.NAMES.${s}`,
  ];
  // The gateway consumes nothing: no consumer anywhere but the ordered ones of its KV reads.
  const gateway = [
    streams.tasks(REGION),
    streams.events(REGION),
    streams.dlq(REGION),
    streams.bodies(REGION),
    `KV_${buckets.workers(REGION)}`,
    `KV_${buckets.rollout(REGION)}`,
  ].flatMap(consumerVerbs);
  expect(await notRefused(await as("gateway"), gateway)).toEqual([]);
  // The solver reads EVENTS through the notifier consumers the administering side made: it
  // creates, changes or deletes none there (nor on DLQ and BODIES), and deletes none on TASKS.
  const notifier = notifierHooksConsumerConfig(REGION).durable_name;
  const solver = [streams.events(REGION), streams.dlq(REGION), streams.bodies(REGION)].flatMap(consumerVerbs);
  solver.push(
    `$JS.API.CONSUMER.CREATE.${streams.events(REGION)}.${notifier}`,
    `$JS.API.CONSUMER.DURABLE.CREATE.${streams.events(REGION)}.${notifier}`,
    `$JS.API.CONSUMER.DELETE.${streams.events(REGION)}.${notifier}`,
    `$JS.API.CONSUMER.DELETE.${streams.tasks(REGION)}.solver_${REGION}_normal_v1`,
    `$JS.API.CONSUMER.LIST.${streams.tasks(REGION)}`,
  );
  expect(await notRefused(await as("solver"), solver)).toEqual([]);
});

test("the gateway reads no message of TASKS, EVENTS, DLQ or BODIES; the solver none of EVENTS, DLQ or BODIES but through its consumers", async () => {
  const reads = (s: string) => [
    `$JS.API.STREAM.MSG.GET.${s}`,
    `$JS.API.DIRECT.GET.${s}`,
    `$JS.API.DIRECT.GET.${s}.${s.toLowerCase()}.x`,
  ];
  expect(
    await notRefused(
      await as("gateway"),
      [streams.tasks(REGION), streams.events(REGION), streams.dlq(REGION), streams.bodies(REGION)].flatMap(reads),
    ),
  ).toEqual([]);
  expect(
    await notRefused(
      await as("solver"),
      [streams.tasks(REGION), streams.events(REGION), streams.dlq(REGION), streams.bodies(REGION)].flatMap(reads),
    ),
  ).toEqual([]);
});

test("an app's user cannot listen on another user's inboxes (where the solver's pulled messages and recovery's reads are delivered)", async () => {
  for (const role of ["gateway", "solver"] as const) {
    const nc = await as(role);
    const refused = async (subject: string) => {
      const sub = nc.subscribe(subject);
      const done = (async () => {
        for await (const _ of sub) return "delivered";
        return "closed";
      })().catch((e: Error) => (/permissions violation/i.test(e.message) ? "refused" : e.message));
      return Promise.race([done, Bun.sleep(3000).then(() => "not refused")]);
    };
    const other = role === "gateway" ? "solver" : "gateway";
    expect({
      role,
      got: await Promise.all(
        [
          "_INBOX.>",
          "_INBOX.*",
          `_INBOX.${other}.>`,
          "_INBOX.recovery.>",
          "$JS.ACK.>",
          `$KV.${buckets.config(REGION)}.>`,
        ].map(refused),
      ),
    }).toEqual({ role, got: ["refused", "refused", "refused", "refused", "refused", "refused"] });
  }
});

// The reviewer's attacks (issue 34), one by one, as the gateway's user; each is refused and the
// administering side finds nothing changed.
test("attack: the gateway's user cannot lower EVENTS' limits to empty it", async () => {
  const adminJsm = await jetstreamManager(admin);
  await jetstream(admin).publish(eventSubject(REGION, "accepted"), "{}");
  const before = await adminJsm.streams.info(streams.events(REGION));
  const jsm = await jetstreamManager(await as("gateway"));
  await expect(jsm.streams.update(streams.events(REGION), { ...before.config, max_msgs: 5 })).rejects.toThrow(
    /permissions violation/i,
  );
  const after = await adminJsm.streams.info(streams.events(REGION));
  expect(after.config.max_msgs).toBe(before.config.max_msgs);
  expect(after.state.messages).toBe(before.state.messages);
});

test("attack: the gateway's user cannot empty the DLQ", async () => {
  const adminJsm = await jetstreamManager(admin);
  await jetstream(admin).publish(`dlq.${REGION}.image`, "{}");
  const before = (await adminJsm.streams.info(streams.dlq(REGION))).state.messages;
  const jsm = await jetstreamManager(await as("gateway"));
  await expect(jsm.streams.purge(streams.dlq(REGION))).rejects.toThrow(/permissions violation/i);
  await expect(jsm.streams.update(streams.dlq(REGION), { max_msgs: 1 })).rejects.toThrow(/permissions violation/i);
  expect((await adminJsm.streams.info(streams.dlq(REGION))).state.messages).toBe(before);
});

test("attack: the gateway's user cannot seal the config bucket; the operator's next config write succeeds", async () => {
  const jsm = await jetstreamManager(await as("gateway"));
  await expect(jsm.streams.update(`KV_${buckets.config(REGION)}`, { sealed: true } as never)).rejects.toThrow(
    /permissions violation/i,
  );
  const config = await openConfigBucket(admin, REGION);
  expect(await config.put("solver", "{}")).toBeGreaterThan(0);
  expect((await (await jetstreamManager(admin)).streams.info(`KV_${buckets.config(REGION)}`)).config.sealed).toBe(
    false,
  );
});

test("attack: the gateway's user cannot read an image body back, from EVENTS or BODIES", async () => {
  const body = Buffer.from("a captcha image").toString("base64");
  await jetstream(admin).publish(bodySubject(REGION, "t-img"), JSON.stringify({ taskId: "t-img", bodies: { body } }));
  await jetstream(admin).publish(
    eventSubject(REGION, "accepted"),
    JSON.stringify({ taskId: "t-img", data: { params: { body } } }),
  );
  const jsm = await jetstreamManager(await as("gateway"));
  for (const stream of [streams.events(REGION), streams.bodies(REGION)]) {
    const subject = stream === streams.bodies(REGION) ? bodySubject(REGION, "t-img") : eventSubject(REGION, "accepted");
    await expect(jsm.streams.getMessage(stream, { last_by_subj: subject })).rejects.toThrow(/permissions violation/i);
    await expect(jsm.direct.getMessage(stream, { last_by_subj: subject })).rejects.toThrow(
      /permissions violation|timeout/i,
    );
  }
});

test("attack: an app's user publishes only the event kinds its app emits; the gateway's forged `completed` gets no PubAck and is not stored", async () => {
  const adminJsm = await jetstreamManager(admin);
  const before = (await adminJsm.streams.info(streams.events(REGION))).state.messages;
  const forged = JSON.stringify({
    taskId: "t-forged",
    kind: "completed",
    state: "completed",
    version: 9,
    region: REGION,
    at: new Date().toISOString(),
    data: { token: "forged" },
  });
  const gw = jetstream(await as("gateway"));
  for (const subject of [
    eventSubject(REGION, "completed"),
    hookEventSubject(REGION, "completed"),
    eventSubject(REGION, "failed"),
    eventSubject(REGION, "solving"),
    eventSubject(REGION, "adopted"),
  ])
    await expect(gw.publish(subject, forged, { timeout: 3000 })).rejects.toThrow(/permissions violation/i);
  const solver = jetstream(await as("solver"));
  for (const subject of [
    eventSubject(REGION, "accepted"),
    eventSubject(REGION, "cancelled"),
    hookEventSubject(REGION, "cancelled"),
    eventSubject(REGION, "redriven"),
    eventSubject(REGION, "adopted"),
  ])
    await expect(solver.publish(subject, forged, { timeout: 3000 })).rejects.toThrow(/permissions violation/i);
  expect((await adminJsm.streams.info(streams.events(REGION))).state.messages).toBe(before);
  // What each app emits still goes through.
  for (const kind of ["accepted", "cancelled", "redriven"])
    expect((await gw.publish(eventSubject(REGION, kind), "{}")).stream).toBe(streams.events(REGION));
  expect((await gw.publish(hookEventSubject(REGION, "cancelled"), "{}")).stream).toBe(streams.events(REGION));
  for (const kind of ["solving", "submitted", "retrying", "completed", "failed", "breaker"])
    expect((await solver.publish(eventSubject(REGION, kind), "{}")).stream).toBe(streams.events(REGION));
  for (const kind of ["completed", "failed"])
    expect((await solver.publish(hookEventSubject(REGION, kind), "{}")).stream).toBe(streams.events(REGION));
});

test("attack: a push consumer an app's user makes on a KV bucket it reads cannot deliver a forged event into EVENTS", async () => {
  const adminJsm = await jetstreamManager(admin);
  const before = (await adminJsm.streams.info(streams.events(REGION))).state.messages;
  // The solver writes the workers bucket: a forged `accepted` event as a value, delivered onto the event subject.
  const nc = await as("solver");
  await (await bindBucket(nc, buckets.workers(REGION))).put(
    "forged",
    JSON.stringify({
      taskId: "t-push",
      kind: "accepted",
      state: "queued",
      version: 0,
      region: REGION,
      at: new Date().toISOString(),
      data: { owner: "someone" },
    }),
  );
  const push = { ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.All };
  const made = await (await jetstreamManager(nc)).consumers
    .add(`KV_${buckets.workers(REGION)}`, {
      ...push,
      name: "inject",
      deliver_subject: eventSubject(REGION, "accepted"),
    })
    .then(
      () => "made",
      (e: Error) => e.message,
    );
  // The gateway reads the region bucket; it aims one at `completed`.
  const gw = await as("gateway");
  await (await jetstreamManager(gw)).consumers
    .add(`KV_${buckets.region(REGION)}`, {
      ...push,
      name: "inject",
      deliver_subject: eventSubject(REGION, "completed"),
    })
    .catch(() => undefined);
  await Bun.sleep(1500);
  expect({ made, stored: (await adminJsm.streams.info(streams.events(REGION))).state.messages - before }).toMatchObject(
    { stored: 0 },
  );
  for (const b of [buckets.workers(REGION), buckets.region(REGION)])
    await adminJsm.consumers.delete(`KV_${b}`, "inject").catch(() => undefined);
});

test("what each app does at start still works as its own user: the streams' info, the buckets bound, the solver's lane and notifier consumers", async () => {
  const gw = await as("gateway");
  expect(
    (
      await requireStreams(await jetstreamManager(gw), [
        streams.tasks(REGION),
        streams.events(REGION),
        streams.bodies(REGION),
      ])
    ).map((i) => i.config.name),
  ).toEqual([streams.tasks(REGION), streams.events(REGION), streams.bodies(REGION)]);
  await jetstream(gw).publish(bodySubject(REGION, "t-own"), "{}");
  // The fence's lease view: read and watched.
  await jetstream(admin).publish(`$KV.${buckets.region(REGION)}.lease`, '{"x":1}');
  const lease = await bindBucket(gw, buckets.region(REGION));
  expect((await lease.get("lease"))?.string()).toBe('{"x":1}');
  const watch = await lease.watch({ key: "lease" });
  for await (const e of watch) {
    expect(e.string()).toBe('{"x":1}');
    break;
  }

  const nc = await as("solver");
  const jsm = await jetstreamManager(nc);
  await requireStreams(jsm, [streams.tasks(REGION), streams.events(REGION), streams.dlq(REGION)]);
  const config = await bindBucket(nc, buckets.config(REGION));
  expect((await config.get("solver"))?.string()).toBe("{}");
  await (await bindBucket(nc, buckets.workers(REGION))).put("w2", "{}");
  // Its version's lane consumers, made and changed by the solver itself: the first version of the
  // region writes the assignment and takes every shard; a second one gets idle consumers.
  const rollout = await bindBucket(nc, buckets.rollout(REGION));
  await ensureVersionConsumers(jsm, rollout, { region: REGION, version: "v1", ackWaitMs: 30_000, by: "perm test" });
  expect((await readAssignment(rollout))?.assignment.owners.every((v) => v === "v1")).toBe(true);
  await ensureVersionConsumers(jsm, rollout, { region: REGION, version: "v2", ackWaitMs: 30_000, by: "perm test" });
  expect(
    (await jsm.consumers.info(streams.tasks(REGION), laneConsumer(REGION, "normal", "v2"))).config.filter_subjects,
  ).toEqual([`tasks.${REGION}.normal.idle_v2`]);
  // The notifier's consumer, made by the provisioning, read and acked.
  const name = await notifierConsumerName(jsm, REGION);
  expect(name).toBe(notifierHooksConsumerConfig(REGION).durable_name);
  await jetstream(nc).publish(hookEventSubject(REGION, "completed"), "{}");
  const m = await (await jetstream(nc).consumers.get(streams.events(REGION), name)).next({ expires: 2000 });
  expect(m?.subject).toMatch(/^events\.perm\.(completed|failed|cancelled)\.hook$/);
  expect(await m!.ackAck()).toBe(true);
});

test("an app finds a region nobody provisioned: it names what is missing, waits for it, and goes on once the administering side made it", async () => {
  const gw = await jetstreamManager(await as("gateway"));
  const nc = await as("solver");
  const err = await requireStreams(gw, [streams.tasks(BARE), streams.events(BARE)]).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(TopologyMissingError);
  expect((err as Error).message).toContain(
    `stream ${streams.tasks(BARE)}, stream ${streams.events(BARE)} do not exist`,
  );
  expect(String(await bindBucket(nc, buckets.config(BARE)).catch((e: unknown) => e))).toContain(
    `KV bucket ${buckets.config(BARE)} (stream KV_${buckets.config(BARE)}) does not exist`,
  );
  expect(String(await notifierConsumerName(await jetstreamManager(nc), BARE).catch((e: unknown) => e))).toContain(
    `consumer ${streams.events(BARE)}/${notifierHooksConsumerConfig(BARE).durable_name}`,
  );
  // Nothing was created by trying.
  await expect((await jetstreamManager(admin)).streams.info(streams.tasks(BARE))).rejects.toThrow(/not found/);
  const waiting = requireStreams(gw, [streams.tasks(BARE), streams.bodies(BARE)], { waitMs: 20_000, everyMs: 100 });
  await Bun.sleep(300);
  await provisionRegion(admin, { region: BARE });
  expect((await waiting).map((i) => i.config.name)).toEqual([streams.tasks(BARE), streams.bodies(BARE)]);
  expect(await notifierConsumerName(await jetstreamManager(nc), BARE, { waitMs: 5000 })).toBe(
    notifierHooksConsumerConfig(BARE).durable_name,
  );
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
