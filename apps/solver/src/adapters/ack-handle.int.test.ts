// AckHandle against a real nats-server: the payloads it publishes to a delivery's reply subject
// do what JsMsg's do (ack, nak with a delay, term, working), judged by what JetStream redelivers.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { AckPolicy, type JsMsg, jetstream, jetstreamManager } from "@nats-io/jetstream";
import type { Msg } from "@nats-io/transport-node";
import { startTestNats, type TestNats } from "@pipeline/devstack/testing";
import { connectNats, type NatsConnection } from "@pipeline/shared/nats";
import { term } from "../domain/outcome.ts";
import { ackHandle, applyOutcome } from "./nats.ts";

let nats: TestNats;
let nc: NatsConnection;

beforeAll(async () => {
  nats = await startTestNats();
  nc = await connectNats(nats.url, "ack-handle-test", nats.auth("admin"));
});
afterAll(async () => {
  await nc.close();
  await nats.stop();
});

/** A stream with one message and a consumer with a 1 s AckWait; `next()` pulls one delivery or null. */
async function oneMessage(name: string) {
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name, subjects: [`${name}.>`] });
  await jsm.consumers.add(name, { durable_name: "c", ack_policy: AckPolicy.Explicit, ack_wait: 1_000_000_000 });
  const js = jetstream(nc);
  await js.publish(`${name}.x`, "hello");
  const consumer = await js.consumers.get(name, "c");
  return { next: (expires = 1500): Promise<JsMsg | null> => consumer.next({ expires }) };
}

const handleOf = (m: JsMsg) => ackHandle((s, p) => nc.publish(s, p), (m as unknown as { reply: string }).reply);

test("ack: never delivered again", async () => {
  const c = await oneMessage("ACKED");
  const m = (await c.next())!;
  handleOf(m).ack();
  await nc.flush();
  expect(await c.next(2000)).toBeNull();
});

test("nak with a delay: delivered again after it, not before; a second final ack is a no-op", async () => {
  const c = await oneMessage("NAKED");
  const m = (await c.next())!;
  const h = handleOf(m);
  h.nak(600);
  h.ack(); // ignored: the nak was final
  await nc.flush();
  const t0 = Date.now();
  const again = await c.next(3000);
  expect(again?.info.deliveryCount).toBe(2);
  expect(Date.now() - t0).toBeGreaterThanOrEqual(450);
  handleOf(again!).ack();
});

test("term: never delivered again", async () => {
  const c = await oneMessage("TERMED");
  const m = (await c.next())!;
  handleOf(m).term("unparseable");
  await nc.flush();
  expect(await c.next(2000)).toBeNull();
});

// `+TERM <reason>` (nats-server 2.9 did not parse it and redelivered; we sent a plain +TERM then).
test("applyOutcome's term sticks and its reason reaches the server's advisory", async () => {
  const advisories = nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.>");
  const it = advisories[Symbol.asyncIterator]();
  for (const [name, handle] of [
    ["TERMJS", (m: JsMsg) => m],
    ["TERMAH", handleOf],
  ] as const) {
    const c = await oneMessage(name);
    const m = (await c.next())!;
    applyOutcome(handle(m), term("unparseable task message"));
    await nc.flush();
    expect(await c.next(2000)).toBeNull();
    const adv = ((await it.next()).value as Msg).json() as { stream: string; reason: string };
    expect(adv).toMatchObject({ stream: name, reason: "unparseable task message" });
  }
  advisories.unsubscribe();
});

test("working: keeps a delivery past its AckWait; then ack ends it", async () => {
  const c = await oneMessage("WORKING");
  const m = (await c.next())!;
  const h = handleOf(m);
  const keepAlive = setInterval(() => h.working(), 300);
  try {
    // Held 2.5 s with a 1 s AckWait: not delivered again meanwhile.
    expect(await c.next(2500)).toBeNull();
  } finally {
    clearInterval(keepAlive);
  }
  h.ack();
  await nc.flush();
  expect(await c.next(2000)).toBeNull();
});

test("without working() the same delivery comes back after its AckWait (the test above can fail)", async () => {
  const c = await oneMessage("NOTWORKING");
  const m = (await c.next())!;
  const again = await c.next(2500);
  expect(again?.info.deliveryCount).toBe(2);
  handleOf(again!).ack();
  void m;
});
