// The webhook sender against a real nats-server (the claims bucket) and a real HTTP receiver:
// two senders of one event post once; a receiver that refuses with 503 is retried, one that times
// out is not (it may have posted it); a refused connection is retried; off without a URL; the
// webhook URL never reaches a log line.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { NatsConnection } from "@nats-io/transport-node";
import { startTestNats, type TestNats } from "@pipeline/devstack/testing";
import { createLogger } from "../log.ts";
import { connectNats } from "../nats/connection.ts";
import { kvClaims, openNotifyBucket } from "./claims.ts";
import type { Notification } from "./message.ts";
import { createNotifier } from "./sender.ts";

let nats: TestNats;
let nc: NatsConnection;
const lines: string[] = [];
const log = createLogger("notify-test", { level: "info", destination: { write: (s: string) => lines.push(s) } });
const received: { path: string; body: Record<string, unknown> }[] = [];
let status = 200;
let delayMs = 0;
let server: ReturnType<typeof Bun.serve>;
const SECRET = `T000/B000/${crypto.randomUUID()}`;
let url: string;

beforeAll(async () => {
  nats = await startTestNats({ regions: ["nt"] });
  nc = await connectNats(nats.url, "notify-test", nats.auth("admin"));
  server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const body = (await req.json()) as Record<string, unknown>;
      if (delayMs) await Bun.sleep(delayMs);
      received.push({ path: new URL(req.url).pathname, body });
      return new Response(status === 200 ? "ok" : "busy", { status });
    },
  });
  url = `http://127.0.0.1:${server.port}/services/${SECRET}`;
});
afterAll(async () => {
  server?.stop(true);
  await nc?.close();
  await nats?.dispose();
});

const event = (key: string): Notification => ({
  key,
  kind: "failover",
  severity: "critical",
  region: "nt",
  title: "region hel1 taken over",
  text: "hel1 silent 9.2 s past its lease; its unfinished tasks adopted",
  path: "/console",
});

test("two senders (two services, or one restarted) of the same event post it once", async () => {
  const claims = kvClaims(await openNotifyBucket(nc, "nt"));
  const a = createNotifier({ url, consoleUrl: "http://127.0.0.1:8090", claims, log });
  const b = createNotifier({ url, consoleUrl: "http://127.0.0.1:8090", claims, log });
  received.length = 0;
  const outcomes = await Promise.all([a.notify(event("failover:hel1:3")), b.notify(event("failover:hel1:3"))]);
  expect(outcomes.sort()).toEqual(["duplicate", "sent"]);
  expect(received).toHaveLength(1);
  expect(received[0]!.path).toBe(`/services/${SECRET}`);
  expect(received[0]!.body.text).toContain("region hel1 taken over");
  expect(received[0]!.body.text).toContain("<http://127.0.0.1:8090/console|Open the console>");
  expect(await a.notify(event("failover:hel1:3"))).toBe("duplicate");
  expect(await a.notify(event("failover:hel1:4"))).toBe("sent");
  expect(received).toHaveLength(2);
});

test("a 503 is retried until the receiver takes it; a 400 is not; a timeout is not (it may have posted)", async () => {
  const claims = kvClaims(await openNotifyBucket(nc, "nt"));
  const n = createNotifier({ url, claims, log, backoffMs: 50, attempts: 3, timeoutMs: 300 });
  received.length = 0;
  status = 503;
  const retried = n.notify(event("dlq:nt:1"));
  await Bun.sleep(80);
  status = 200;
  expect(await retried).toBe("sent");
  expect(received.length).toBeGreaterThanOrEqual(2);
  received.length = 0;
  status = 400;
  expect(await n.notify(event("dlq:nt:2"))).toBe("failed");
  expect(received).toHaveLength(1);
  status = 200;
  received.length = 0;
  delayMs = 600;
  expect(await n.notify(event("dlq:nt:3"))).toBe("failed");
  await Bun.sleep(700);
  delayMs = 0;
  expect(received).toHaveLength(1);
});

test("a refused connection is retried (never delivered); without a URL nothing is sent or claimed", async () => {
  const claims = kvClaims(await openNotifyBucket(nc, "nt"));
  const probe = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("x") });
  const deadPort = probe.port;
  probe.stop(true);
  const calls: string[] = [];
  const n = createNotifier({
    url: `http://127.0.0.1:${deadPort}/hook`,
    claims,
    log,
    backoffMs: 20,
    attempts: 3,
    fetch: (u, init) => {
      calls.push(u);
      return fetch(u, init);
    },
  });
  expect(await n.notify(event("fence:nt:9"))).toBe("failed");
  expect(calls).toHaveLength(3);
  const off = createNotifier({ url: undefined, claims, log });
  expect(await off.notify(event("fence:nt:10"))).toBe("off");
  // Not claimed while off: once a URL is set, the event can still be sent.
  expect(await createNotifier({ url, claims, log }).notify(event("fence:nt:10"))).toBe("sent");
});

test("the webhook URL (a secret) is in no log line", () => {
  expect(lines.length).toBeGreaterThan(3);
  expect(lines.join("\n")).not.toContain(SECRET);
  expect(lines.join("\n")).toContain("notification sent");
});
