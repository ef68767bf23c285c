// Callbacks are retried from webhook_deliveries, not by holding events: one tenant whose
// receiver refuses its callbacks cannot delay another tenant's, and a solver killed mid-delivery
// leaves the delivery to the next solver, under the same delivery id, delivered once.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { jetstreamManager } from "@nats-io/jetstream";
import { eventually } from "@pipeline/devstack/testing";
import { connectNats, notifierHooksConsumerConfig } from "@pipeline/shared/nats";
import type { TaskView } from "@pipeline/shared/schemas";
import { streams } from "@pipeline/shared/subjects";
import { verifyWebhook, WEBHOOK_HEADERS } from "@pipeline/shared/webhooks";
import { clientSecret, type Stack, startStack } from "./harness.ts";

const REGION = "cb";
const TENANT_B_KEY = "e2e-tenant-b-key-0001";
const HOLD_MS = 4000; // tenant A's receiver holds each callback this long, then answers 500

let s: Stack;
beforeAll(async () => {
  s = await startStack({
    region: REGION,
    gatewayEnv: { API_KEYS: `e2e-client-key-0001,${TENANT_B_KEY}` },
    // 8 attempts in flight per solver, at most 5 per tenant: without the tenant cap, A's
    // held callbacks would take all 8 and B's would wait for one of them to end.
    solverEnv: {
      WEBHOOK_CONCURRENCY: "8",
      WEBHOOK_TENANT_MAX_IN_FLIGHT: "5",
      WEBHOOK_TIMEOUT_MS: String(HOLD_MS + 1000),
      WEBHOOK_POLL_MS: "200",
    },
  });
});
afterAll(() => s.stop());

let n = 0;
async function submit(key: string, callbackUrl: string): Promise<string> {
  const res = await fetch(`${s.gatewayUrl}/v1/tasks`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({
      type: "turnstile",
      params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/cb/${++n}` },
      callbackUrl,
    }),
  });
  expect(res.status).toBe(202);
  return ((await res.json()) as { id: string }).id;
}
async function completedAt(key: string, id: string): Promise<number> {
  const res = await fetch(`${s.gatewayUrl}/v1/tasks/${id}?wait=20`, { headers: { authorization: `Bearer ${key}` } });
  const view = (await res.json()) as TaskView;
  expect(view.status).toBe("completed");
  return Date.parse(view.completedAt!);
}

test("tenant A's refusing receiver holds at most 5 callbacks in flight; tenant B's callback arrives within 2 s", async () => {
  let aInFlight = 0;
  let aMax = 0;
  let aRequests = 0;
  const receiverA = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 30,
    async fetch(req) {
      await req.text();
      aRequests++;
      aMax = Math.max(aMax, ++aInFlight);
      await Bun.sleep(HOLD_MS);
      aInFlight--;
      return new Response("no", { status: 500 });
    },
  });
  const atB: Array<{ at: number; delivery: string | null; ok: boolean }> = [];
  // Tenant B verifies with its own secret; tenant A's does not verify B's callbacks (issue 14.3).
  const [secretB, secretA] = await Promise.all([clientSecret(s, TENANT_B_KEY), clientSecret(s)]);
  let verifiesWithA = false;
  const receiverB = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const body = await req.text();
      const sig = {
        timestamp: req.headers.get(WEBHOOK_HEADERS.timestamp),
        signature: req.headers.get(WEBHOOK_HEADERS.signature),
      };
      const ok = verifyWebhook(secretB, sig, body);
      verifiesWithA ||= verifyWebhook(secretA, sig, body);
      atB.push({ at: Date.now(), delivery: req.headers.get(WEBHOOK_HEADERS.delivery), ok });
      return new Response("ok");
    },
  });
  try {
    const aIds = await Promise.all(
      Array.from({ length: 20 }, () => submit(s.apiKey, `http://127.0.0.1:${receiverA.port}/hook`)),
    );
    await eventually(() => aInFlight === 5, 20_000);

    const b = await submit(TENANT_B_KEY, `http://127.0.0.1:${receiverB.port}/hook`);
    const bDone = await completedAt(TENANT_B_KEY, b);
    await eventually(() => atB.length > 0, 10_000);
    const delay = atB[0]!.at - bDone;
    console.log(
      `[callbacks] tenant B's callback ${delay} ms after its task completed, while tenant A held ${aInFlight} callbacks (max ${aMax}) at a receiver answering 500 after ${HOLD_MS} ms`,
    );
    expect(delay).toBeLessThan(2000);
    expect(atB[0]).toMatchObject({ delivery: `${b}:completed:0`, ok: true });
    expect(secretA).not.toBe(secretB);
    expect(verifiesWithA).toBe(false);
    expect(aMax).toBe(5);

    // The events were acknowledged once their deliveries were recorded: the notifier's
    // consumer holds none of A's failures (they are rows, retried from the table).
    const nc = await connectNats(s.nats.url, "callbacks-check", s.nats.auth("admin"));
    try {
      const jsm = await jetstreamManager(nc);
      await eventually(
        async () =>
          (await jsm.consumers.info(streams.events(REGION), notifierHooksConsumerConfig(REGION).durable_name))
            .num_ack_pending === 0,
        10_000,
      );
    } finally {
      await nc.close();
    }
    const rows = await s.db.sql<Array<{ is_b: boolean; status: string; n: number }>>`
      select task_id = ${b} as is_b, status, count(*)::int as n from webhook_deliveries group by 1, 2 order by 1, 2`;
    expect([...rows]).toEqual([
      { is_b: false, status: "pending", n: aIds.length },
      { is_b: true, status: "delivered", n: 1 },
    ]);
    await Bun.sleep(500);
    expect(atB.length).toBe(1);
    expect(aRequests).toBeGreaterThanOrEqual(5);
  } finally {
    receiverB.stop(true);
    receiverA.stop(true);
  }
}, 90_000);

test("a solver killed mid-delivery: the next solver sends it again from the table, same delivery id, delivered once", async () => {
  // The first solver goes (it has tenant A's callbacks in flight: a graceful stop waits for them);
  // the next one has a short timeout, so its lease (2 x timeout + 5 s) runs out in 7 s.
  await s.solvers[0]!.kill("SIGTERM");
  const seen: Array<{ delivery: string | null; at: number }> = [];
  let hang = true;
  const receiver = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 60,
    async fetch(req) {
      await req.text();
      seen.push({ delivery: req.headers.get(WEBHOOK_HEADERS.delivery), at: Date.now() });
      if (hang) await new Promise<void>(() => {}); // the solver dies while this request waits
      return new Response("ok");
    },
  });
  try {
    const doomed = s.spawnSolver({ WEBHOOK_TIMEOUT_MS: "1000" });
    const id = await submit(s.apiKey, `http://127.0.0.1:${receiver.port}/hook`);
    await eventually(() => seen.length === 1, 20_000);
    await doomed.kill("SIGKILL");
    const killedAt = Date.now();
    hang = false;
    const lease = await s.db.sql<
      Array<{ status: string; lease_owner: string | null }>
    >`select status, lease_owner from webhook_deliveries where task_id = ${id}`;
    expect(lease[0]).toMatchObject({
      status: "pending",
      lease_owner: expect.stringContaining(`solver-${s.solvers.length}`),
    });
    s.spawnSolver({ WEBHOOK_TIMEOUT_MS: "1000" });
    await eventually(
      async () =>
        (await s.db.sql<Array<{ status: string }>>`select status from webhook_deliveries where task_id = ${id}`)[0]
          ?.status === "delivered",
      30_000,
    );
    console.log(
      `[callbacks] a delivery whose solver was killed mid-request was sent again ${seen[1] ? seen[1].at - killedAt : "?"} ms after the kill`,
    );
    expect(seen.map((x) => x.delivery)).toEqual([`${id}:completed:0`, `${id}:completed:0`]);
    await Bun.sleep(500);
    expect(seen.length).toBe(2);
  } finally {
    receiver.stop(true);
  }
}, 90_000);
