// Image bodies stay out of EVENTS (docs/security.md, "Image bodies"): the gateway, connected as
// its own NATS user, publishes an image task's body on BODIES before the 202, and its `accepted`
// event carries the other params and the body's sha256 and size, never the body.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connectNats } from "@pipeline/shared/nats";
import { bodySubject, eventSubject, streams } from "@pipeline/shared/subjects";
import { type GatewayTestStack, startGatewayTestStack } from "../testing/stack.ts";

const REGION = "gwbody";
let s: GatewayTestStack;
let nats: GatewayTestStack["nats"];
let gw: GatewayTestStack["gw"];
let jsm: GatewayTestStack["jsm"];
let database: GatewayTestStack["database"];
let app: GatewayTestStack["app"];

beforeAll(async () => {
  s = await startGatewayTestStack(REGION);
  ({ nats, gw, jsm, database, app } = s);
}, 30_000);
afterAll(async () => {
  await s?.close();
});

const image = Buffer.from("a screenshot that may show someone's name and address").toString("base64");

test("an image task's accepted event carries no body, only its sha256 and size; BODIES holds the body", async () => {
  const res = await app.request("/v1/tasks", {
    method: "POST",
    headers: { authorization: "Bearer client-a-key", "content-type": "application/json" },
    body: JSON.stringify({ type: "image", params: { body: image, phrase: true, numeric: 1 } }),
  });
  expect(res.status).toBe(202);
  const { id } = (await res.json()) as { id: string };
  // The row keeps the body (the solver reads it from Postgres).
  const [row] = await database.sql<{ params: { body?: string } }[]>`select params from tasks where id = ${id}`;
  expect(row?.params.body).toBe(image);
  // EVENTS: the other params, the reference, never the body.
  const m = await jsm.streams.getMessage(streams.events(REGION), { last_by_subj: eventSubject(REGION, "accepted") });
  expect(m).not.toBeNull();
  const raw = m!.string();
  expect(raw).not.toContain(image);
  const ev = m!.json<{
    taskId: string;
    data: { params: Record<string, unknown>; bodies: Array<{ field: string; sha256: string; size: number }> };
  }>();
  expect(ev.taskId).toBe(id);
  expect(ev.data.params).toEqual({ phrase: true, numeric: 1 });
  expect(ev.data.bodies).toEqual([
    { field: "body", sha256: createHash("sha256").update(image).digest("hex"), size: image.length },
  ]);
  // BODIES: the body, under the task's subject, kept only for its retention.
  const b = await jsm.streams.getMessage(streams.bodies(REGION), { last_by_subj: bodySubject(REGION, id) });
  expect(b?.json()).toEqual({ taskId: id, bodies: { body: image } });
  const info = await jsm.streams.info(streams.bodies(REGION));
  expect(info.config.max_msgs_per_subject).toBe(1);
  expect(info.config.max_age).toBeGreaterThan(0);
}, 30_000);

test("a token task's accepted event is unchanged: its params, no body reference", async () => {
  const res = await app.request("/v1/tasks", {
    method: "POST",
    headers: { authorization: "Bearer client-a-key", "content-type": "application/json" },
    body: JSON.stringify({
      type: "turnstile",
      params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com/login" },
    }),
  });
  expect(res.status).toBe(202);
  const ev = (await jsm.streams.getMessage(streams.events(REGION), {
    last_by_subj: eventSubject(REGION, "accepted"),
  }))!.json<{ data: Record<string, unknown> }>();
  expect(ev.data.params).toEqual({ sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com/login" });
  expect(ev.data.bodies).toBeUndefined();
});

test("the gateway's user publishes bodies but cannot read them back; the solver's user cannot read them at all", async () => {
  const solver = await connectNats(nats.url, "gwbody-solver", nats.auth("solver"));
  try {
    for (const nc of [gw, solver]) {
      const m = await (await jetstreamManager(nc)).streams
        .getMessage(streams.bodies(REGION), { seq: 1 })
        .catch((e: Error) => e);
      expect(m).toBeInstanceOf(Error);
      const c = await jetstream(nc, { timeout: 2000 })
        .consumers.get(streams.bodies(REGION))
        .catch((e: Error) => e);
      const next = c instanceof Error ? c : await c.next({ expires: 1000 }).catch((e: Error) => e);
      expect(next === null || next instanceof Error).toBe(true);
    }
    // A solver cannot publish a forged body either.
    await expect(
      jetstream(solver, { timeout: 2000 }).publish(bodySubject(REGION, crypto.randomUUID()), "{}"),
    ).rejects.toThrow();
  } finally {
    await solver.close();
  }
}, 30_000);
