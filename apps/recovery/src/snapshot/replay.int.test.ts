// The replay of EVENTS validates what it writes with the gateway's schemas (issue 14): a message
// that is not a task event, or an `accepted` event the gateway could not have published, is
// counted as skipped and never written; valid events around it are applied.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@pipeline/devstack/testing";
import {
  bodiesStreamConfig,
  connectNats,
  ensureStream,
  ensureStreams,
  type NatsConnection,
} from "@pipeline/shared/nats";
import type { TaskEvent } from "@pipeline/shared/schemas";
import { bodySubject, eventSubject } from "@pipeline/shared/subjects";
import { splitBodies } from "@pipeline/shared/tasks";
import postgres from "postgres";
import { BodiesUnreadableError } from "./bodies.ts";
import { replayEvents } from "./replay.ts";

let nats: TestNats;
let nc: NatsConnection;
let tdb: TestDatabase;
let sql: postgres.Sql;
beforeAll(async () => {
  [nats, tdb] = await Promise.all([startTestNats(), createTestDatabase("replay_validation")]);
  nc = await connectNats(nats.url, "replay-test", nats.auth("admin"));
  await ensureStreams(await jetstreamManager(nc), { region: "local" });
  await ensureStream(await jetstreamManager(nc), bodiesStreamConfig({ region: "local" }));
  sql = postgres(tdb.url, { max: 2, onnotice: () => {} });
}, 30_000);
afterAll(async () => {
  await sql?.end({ timeout: 5 });
  await nc?.close();
  await nats?.dispose();
  await tdb?.drop();
});

const task = {
  owner: "owner-1",
  type: "turnstile",
  priority: "normal",
  params: { sitekey: "s", pageurl: "https://example.com/x" },
  requestHash: "h",
};
const accepted = (data: Record<string, unknown>): TaskEvent => ({
  taskId: crypto.randomUUID(),
  kind: "accepted",
  state: "queued",
  version: 0,
  region: "local",
  at: new Date().toISOString(),
  data,
});

test("events that are not task events, or tasks the gateway would refuse, are counted as skipped and never written", async () => {
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  const good = accepted({ ...task, callbackUrl: "http://127.0.0.1:9/hook" });
  const refused = [
    accepted({ ...task, type: "evil" }),
    accepted({ ...task, params: { pageurl: "https://example.com/x" } }), // no sitekey
    accepted({ ...task, params: { ...task.params, extra: "x" } }), // a field the gateway refuses
    accepted({ ...task, params: { sitekey: "s", pageurl: "javascript:alert(1)" } }),
    accepted({ ...task, priority: "urgent" }),
    accepted({ ...task, callbackUrl: "http://169.254.169.254/latest/meta-data" }), // the metadata service
    accepted({ ...task, callbackUrl: "https://user:pass@hooks.example.com/" }),
    accepted({ ...task, owner: "" }),
  ];
  const last = await js.publish(eventSubject("local", "accepted"), JSON.stringify(good));
  for (const ev of refused) await js.publish(eventSubject("local", "accepted"), JSON.stringify(ev));
  await js.publish(eventSubject("local", "accepted"), "not json");
  await js.publish(
    eventSubject("local", "completed"),
    JSON.stringify({
      taskId: "not-a-uuid",
      kind: "completed",
      state: "completed",
      version: 9,
      region: "local",
      at: new Date().toISOString(),
    }),
  );
  await js.publish(
    eventSubject("local", "completed"),
    JSON.stringify({
      taskId: good.taskId,
      kind: "completed",
      state: "completed",
      version: 3,
      region: "local",
      at: new Date().toISOString(),
      data: { tokenStored: true },
    }),
  );
  const r = await replayEvents({ sql, js, jsm, region: "local", afterSeq: last.seq - 1 });
  expect(r.events).toBe(refused.length + 4);
  expect(r.counts).toEqual({
    inserted: 1,
    applied: 1,
    stale: 0,
    missing: 0,
    skipped: refused.length + 2,
    bodyUnavailable: 0,
  });
  const rows = await sql<
    { id: string; state: string; callback_url: string | null }[]
  >`select id, state, callback_url from tasks`;
  expect([...rows]).toEqual([{ id: good.taskId, state: "completed", callback_url: "http://127.0.0.1:9/hook" }]);
}, 30_000);

test("an image task's body is fetched from BODIES by task id and checked; a body that is gone rebuilds the task failed (BODY_UNAVAILABLE), never queued without it", async () => {
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  await sql`delete from tasks`;
  const body = Buffer.from("screenshot").toString("base64");
  const split = splitBodies("image", { body, phrase: true });
  const image = (id: string) =>
    ({
      taskId: id,
      kind: "accepted",
      state: "queued",
      version: 0,
      region: "local",
      at: new Date().toISOString(),
      data: { ...task, type: "image", params: split.params, bodies: split.refs },
    }) satisfies TaskEvent;
  const [kept, gone, forged] = [crypto.randomUUID(), crypto.randomUUID(), crypto.randomUUID()];
  await js.publish(bodySubject("local", kept), JSON.stringify({ taskId: kept, bodies: split.values }));
  await js.publish(
    bodySubject("local", forged),
    JSON.stringify({ taskId: forged, bodies: { body: Buffer.from("another image").toString("base64") } }),
  );
  const first = await js.publish(eventSubject("local", "accepted"), JSON.stringify(image(kept)));
  await js.publish(eventSubject("local", "accepted"), JSON.stringify(image(gone)));
  await js.publish(eventSubject("local", "accepted"), JSON.stringify(image(forged)));
  // Later events of a task rebuilt without its body must not put it back to work.
  await js.publish(
    eventSubject("local", "solving"),
    JSON.stringify({
      taskId: gone,
      kind: "solving",
      state: "solving",
      version: 1,
      region: "local",
      at: new Date().toISOString(),
      data: { attempt: 1 },
    }),
  );
  const r = await replayEvents({ sql, js, jsm, region: "local", afterSeq: first.seq - 1 });
  expect(r.counts).toEqual({ inserted: 1, applied: 0, stale: 1, missing: 0, skipped: 0, bodyUnavailable: 2 });
  const rows = new Map(
    (
      await sql<
        {
          id: string;
          state: string;
          params: Record<string, unknown>;
          error_code: string | null;
          error_message: string | null;
        }[]
      >`select id, state, params, error_code, error_message from tasks`
    ).map((x) => [x.id, x]),
  );
  expect(rows.get(kept)).toMatchObject({ state: "queued", params: { body, phrase: true }, error_code: null });
  for (const id of [gone, forged])
    expect(rows.get(id)).toMatchObject({ state: "failed", params: {}, error_code: "BODY_UNAVAILABLE" });
  expect(rows.get(gone)?.error_message).toContain("older than its retention");
  expect(rows.get(forged)?.error_message).toContain("does not match");
}, 30_000);

test("a BODIES stream that cannot be read stops the replay (BodiesUnreadableError) instead of failing the image tasks", async () => {
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  await sql`delete from tasks`;
  const split = splitBodies("image", { body: Buffer.from("x").toString("base64") });
  const ev: TaskEvent = {
    taskId: crypto.randomUUID(),
    kind: "accepted",
    state: "queued",
    version: 0,
    region: "local",
    at: new Date().toISOString(),
    data: { ...task, type: "image", params: split.params, bodies: split.refs },
  };
  const first = await js.publish(eventSubject("local", "accepted"), JSON.stringify(ev));
  const unreadable = async () => ({
    ok: false as const,
    reason: "BODIES_LOCAL could not be read: stream not found",
    unreadable: true as const,
  });
  await expect(
    replayEvents({ sql, js, jsm, region: "local", afterSeq: first.seq - 1, bodies: unreadable }),
  ).rejects.toThrow(BodiesUnreadableError);
  expect((await sql`select 1 from tasks where id = ${ev.taskId}`).length).toBe(0);
}, 30_000);
