// The PubAck publisher (one subscription, one sweep timer) against a real nats-server: what the
// client's js.publish answers, it answers: the PubAck, the duplicate flag of a Nats-Msg-Id seen
// before, a JetStream error, the 503 when no stream takes the subject, a timeout when nobody
// answers; and publishWithRetry retries what it should through it.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { DiscardPolicy, type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { startTestNats, type TestNats } from "@pipeline/devstack/testing";
import { connectNats, isRetryablePublishError } from "./connection.ts";
import { createPubAckPublisher, PubAckError, PubAckTimeoutError } from "./pub-acks.ts";
import { publishWithRetry } from "./publish.ts";

let nats: TestNats;
let nc: NatsConnection;
let jsm: JetStreamManager;
beforeAll(async () => {
  nats = await startTestNats({ regions: ["pa"] });
  nc = await connectNats(nats.url, "pub-acks-test", nats.auth("admin"));
  jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: "PA", subjects: ["pa.>"] });
  await jsm.streams.add({ name: "PA_FULL", subjects: ["full.>"], max_msgs: 1, discard: DiscardPolicy.New });
});
afterAll(async () => {
  await nc?.close();
  await nats?.dispose();
});

test("stores with Nats-Msg-Id and answers the PubAck; the same id again is a duplicate of the same message", async () => {
  const pub = createPubAckPublisher(nc);
  const acks = await Promise.all(
    Array.from({ length: 200 }, (_, i) =>
      pub.publish(`pa.e.${i % 3}`, JSON.stringify({ i }), { msgID: `m-${i}`, timeout: 5000 }),
    ),
  );
  expect(acks.every((a) => a.stream === "PA" && !a.duplicate)).toBe(true);
  expect(new Set(acks.map((a) => a.seq)).size).toBe(200);
  const again = await pub.publish("pa.e.1", JSON.stringify({ i: 7 }), { msgID: "m-7", timeout: 5000 });
  expect(again).toMatchObject({ stream: "PA", seq: acks[7]!.seq, duplicate: true });
  const stored = await jsm.streams.getMessage("PA", { seq: acks[42]!.seq });
  expect(stored?.json()).toEqual({ i: 42 });
  expect(stored?.header.get("Nats-Msg-Id")).toBe("m-42");
  expect((await jsm.streams.info("PA")).state.messages).toBe(200);
  expect(pub.pending()).toBe(0);
  pub.close();
});

test("a JetStream error rejects with its code (not retryable); no stream for the subject is a retryable 503", async () => {
  const pub = createPubAckPublisher(nc);
  await pub.publish("full.a", "1", { msgID: "f-1", timeout: 5000 });
  const full = await pub.publish("full.a", "2", { msgID: "f-2", timeout: 5000 }).catch((e: Error) => e);
  expect(full).toBeInstanceOf(PubAckError);
  expect((full as PubAckError).errCode).toBe(10077); // maximum messages exceeded
  expect(isRetryablePublishError(full)).toBe(false);
  const none = await pub.publish("nowhere.a", "x", { msgID: "n-1", timeout: 5000 }).catch((e: Error) => e);
  expect(none).toBeInstanceOf(PubAckError);
  expect((none as PubAckError).code).toBe(503);
  expect(isRetryablePublishError(none)).toBe(true);
  pub.close();
});

test("nobody answers: a timeout (retryable), and publishWithRetry gives up at its deadline", async () => {
  // A plain subscriber on a subject no stream takes: it receives the message and never replies.
  const silent = nc.subscribe("silent.>", { callback: () => {} });
  const pub = createPubAckPublisher(nc, { sweepMs: 20 });
  const t0 = Date.now();
  const err = await pub.publish("silent.a", "x", { msgID: "s-1", timeout: 200 }).catch((e: Error) => e);
  expect(err).toBeInstanceOf(PubAckTimeoutError);
  expect(Date.now() - t0).toBeGreaterThanOrEqual(200);
  expect(isRetryablePublishError(err)).toBe(true);
  expect(pub.pending()).toBe(0);
  const retried = await publishWithRetry(pub, "silent.b", "x", "s-2", 1200).catch((e: Error) => e);
  expect(retried).toBeInstanceOf(PubAckTimeoutError);
  silent.unsubscribe();
  pub.close();
});

test("close rejects what is still waiting; a closed connection rejects too", async () => {
  const silent = nc.subscribe("hush.>", { callback: () => {} });
  const pub = createPubAckPublisher(nc);
  const waiting = pub.publish("hush.a", "x", { msgID: "h-1", timeout: 60_000 }).catch((e: Error) => e);
  pub.close();
  expect(((await waiting) as Error).message).toBe("publisher closed");
  silent.unsubscribe();
  const other = await connectNats(nats.url, "pub-acks-closing", nats.auth("admin"));
  other.subscribe("mute.>", { callback: () => {} });
  const pub2 = createPubAckPublisher(other);
  const pending = pub2.publish("mute.a", "x", { msgID: "c-1", timeout: 60_000 }).catch((e: Error) => e);
  await other.close();
  expect(((await pending) as Error).message).toBe("NATS connection closed");
});
