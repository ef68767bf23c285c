// The replay of EVENTS validates what it writes with the gateway's schemas (issue 14): a message
// that is not a task event, or an `accepted` event the gateway could not have published, is
// counted as skipped and never written; valid events around it are applied.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import postgres from "postgres";
import { connectNats, ensureStreams, type NatsConnection } from "@pipeline/shared/nats";
import type { TaskEvent } from "@pipeline/shared/schemas";
import { eventSubject } from "@pipeline/shared/subjects";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@pipeline/shared/testing";
import { replayEvents } from "./replay.ts";

let nats: TestNats;
let nc: NatsConnection;
let tdb: TestDatabase;
let sql: postgres.Sql;
beforeAll(async () => {
  [nats, tdb] = await Promise.all([startTestNats(), createTestDatabase("replay_validation")]);
  nc = await connectNats(nats.url, "replay-test", nats.auth("admin"));
  await ensureStreams(await jetstreamManager(nc), { region: "local" });
  sql = postgres(tdb.url, { max: 2, onnotice: () => {} });
}, 30_000);
afterAll(async () => {
  await sql?.end({ timeout: 5 });
  await nc?.close();
  await nats?.dispose();
  await tdb?.drop();
});

const task = { owner: "owner-1", type: "turnstile", priority: "normal", params: { sitekey: "s", pageurl: "https://example.com/x" }, requestHash: "h" };
const accepted = (data: Record<string, unknown>): TaskEvent => ({ taskId: crypto.randomUUID(), kind: "accepted", state: "queued", version: 0, region: "local", at: new Date().toISOString(), data });

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
  await js.publish(eventSubject("local", "completed"), JSON.stringify({ taskId: "not-a-uuid", kind: "completed", state: "completed", version: 9, region: "local", at: new Date().toISOString() }));
  await js.publish(eventSubject("local", "completed"), JSON.stringify({ taskId: good.taskId, kind: "completed", state: "completed", version: 3, region: "local", at: new Date().toISOString(), data: { tokenStored: true } }));
  const r = await replayEvents({ sql, js, jsm, region: "local", afterSeq: last.seq - 1 });
  expect(r.events).toBe(refused.length + 4);
  expect(r.counts).toEqual({ inserted: 1, applied: 1, stale: 0, missing: 0, skipped: refused.length + 2 });
  const rows = await sql<{ id: string; state: string; callback_url: string | null }[]>`select id, state, callback_url from tasks`;
  expect([...rows]).toEqual([{ id: good.taskId, state: "completed", callback_url: "http://127.0.0.1:9/hook" }]);
}, 30_000);
