import { afterAll, beforeAll, expect, test } from "bun:test";
import { jetstreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { startTestNats, type TestNats } from "@pipeline/devstack/testing";
import { connectNats, type NatsConnection } from "../nats/connection.ts";
import { liveWorkers, openWorkersBucket } from "./heartbeats.ts";
import { StaleViewError, watchWorkers } from "./workers-view.ts";

let nats: TestNats;
let nc: NatsConnection;
let kv: KV;
beforeAll(async () => {
  nats = await startTestNats();
  nc = await connectNats(nats.url, "workers-view-test", nats.auth("admin"));
  kv = await openWorkersBucket(nc, "wv");
});
afterAll(async () => {
  await nc.close();
  await nats.dispose();
});

const beat = (workerId: string, at: number) =>
  JSON.stringify({
    workerId,
    pid: 1,
    host: "h",
    version: "v",
    startedAt: new Date(at - 60_000).toISOString(),
    at: new Date(at).toISOString(),
    inFlight: 0,
    keyName: "k",
    keyRef: "r",
    breaker: "closed",
    configRevision: null,
    configRejected: null,
  });

/** Waits for `f` to hold; an answer that throws (a stale view, until the watch delivers) is not yet. */
const settle = async (f: () => boolean) => {
  const holds = () => {
    try {
      return f();
    } catch {
      return false;
    }
  };
  for (let i = 0; i < 100 && !holds(); i++) await Bun.sleep(20);
};

test("the view answers as listing does, and refuses while it has not seen its own fresh beat", async () => {
  const now = Date.now();
  await kv.put("peer.a", beat("peer.a", now - 500));
  await kv.put("old.b", beat("old.b", now - 8000));
  await kv.put("bad", "{not json");
  const view = await watchWorkers(kv, { self: "me.1", staleAfterMs: 5000 });
  try {
    expect(() => view.live(now)).toThrow(StaleViewError); // own beat not seen yet
    await kv.put("me.1", beat("me.1", now - 6000));
    await settle(() => {
      try {
        view.live(now);
        return true;
      } catch (e) {
        return !(e as Error).message.includes("not seen");
      }
    });
    expect(() => view.live(now)).toThrow(/stale: this worker's own heartbeat was seen 6000 ms ago/);
    await kv.put("me.1", beat("me.1", now));
    await settle(() => view.live(now).workers.length > 0);
    const seen = view.live(now, 6000);
    const listed = await liveWorkers(kv, now, 6000);
    expect(seen.workers.map((w) => w.workerId)).toEqual(listed.workers.map((w) => w.workerId));
    expect(seen.workers.map((w) => w.workerId)).toEqual(["me.1", "peer.a"]);
    expect(seen.unreadable).toEqual(["bad"]);
    // A deleted entry (a solver's clean stop) leaves the view.
    await kv.delete("peer.a");
    await settle(() => view.live(now, 6000).workers.length === 1);
    expect(view.live(now, 6000).workers.map((w) => w.workerId)).toEqual(["me.1"]);
  } finally {
    view.stop();
    await kv.delete("bad");
  }
});

test("listing leaves a consumer on the server per call; the view keeps one", async () => {
  const jsm = await jetstreamManager(nc);
  const consumers = async () => (await jsm.streams.info("KV_workers_wv")).state.consumer_count;
  const before = await consumers();
  for (let i = 0; i < 5; i++) await liveWorkers(kv);
  const afterListing = await consumers();
  expect(afterListing - before).toBeGreaterThanOrEqual(4);
  const view = await watchWorkers(kv, { self: "me.1", staleAfterMs: 5000 });
  await kv.put("me.1", beat("me.1", Date.now()));
  for (let i = 0; i < 5; i++) {
    await settle(() => view.live().workers.length > 0);
    view.live();
  }
  expect((await consumers()) - afterListing).toBe(1);
  view.stop();
});
