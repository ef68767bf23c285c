// The bulk poller against the real emulator (HTTP, the real protocol).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createEmulator, type Emulator } from "@pipeline/emulator";
import { type ProviderReply, toProviderParams } from "@pipeline/shared/provider";
import type { TaskSpec, TaskType } from "@pipeline/shared/schemas";
import { createBulkPoller } from "./bulk-poller.ts";
import { createProviderClient } from "./provider.ts";

const KEY = "bulk-poller-key-0001";
let emu: Emulator;
beforeAll(async () => {
  emu = createEmulator({ port: 0, keys: { [KEY]: { threads: 1000 } }, latencyMs: 300 });
  await emu.start();
});
afterAll(() => emu.stop());

const specs: TaskSpec[] = [
  ...Array.from(
    { length: 40 },
    (_, i) =>
      ({
        type: "turnstile",
        params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/t/${i}` },
      }) as TaskSpec,
  ),
  ...Array.from(
    { length: 40 },
    (_, i) =>
      ({
        type: "recaptcha_v2",
        params: { sitekey: "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-", pageurl: `https://example.com/r/${i}` },
      }) as TaskSpec,
  ),
  ...Array.from(
    { length: 3 },
    (_, i) =>
      ({
        type: "geetest",
        params: {
          gt: "81388ea1fc187e0c335c0a8907ff2625",
          challenge: `2e2f0f65240058b683cb6ea21c303ee${i}`,
          pageurl: `https://example.com/g/${i}`,
        },
      }) as TaskSpec,
  ),
];

async function pollUntilDone(
  poll: (id: string, type: TaskType) => Promise<ProviderReply>,
  id: string,
  type: TaskType,
): Promise<ProviderReply> {
  for (;;) {
    const r = await poll(id, type);
    if (r.kind !== "not_ready") return r;
    await Bun.sleep(50);
  }
}

test("concurrent polls share bulk requests; answers (turnstile's user agent included) are those of single polls", async () => {
  const provider = createProviderClient({ url: emu.url, timeoutMs: 5000 });
  const poller = createBulkPoller(provider);
  const submitted = await Promise.all(
    specs.map(async (spec) => {
      const r = await provider.submit(toProviderParams(spec), KEY);
      if (r.kind !== "ok") throw new Error(`submit failed: ${JSON.stringify(r)}`);
      return { id: r.value, type: spec.type };
    }),
  );
  emu.resetStats();
  const replies = await Promise.all(
    submitted.map((t) => pollUntilDone((id, type) => poller.poll(id, KEY, type), t.id, t.type)),
  );
  const stats = emu.stats();
  for (const [i, r] of replies.entries()) {
    expect(r.kind).toBe("ok");
    const answer = emu.task(submitted[i]!.id)?.answer;
    expect(r.kind === "ok" && r.value).toBe(answer!);
    if (submitted[i]!.type === "turnstile") expect(r.kind === "ok" && typeof r.extra?.useragent).toBe("string");
  }
  // Every task was polled several times (300 ms at 50 ms steps), yet the requests are few: the
  // bulk ones, one single read per turnstile answer, and the geetest tasks on their own.
  const perTask = Object.values(stats.pollsByProviderId);
  const polls = perTask.reduce((a, b) => a + b, 0);
  console.log(`[bulk-poller] ${specs.length} tasks: ${polls} polls in ${stats.resCalls} res.php requests`);
  expect(polls).toBeGreaterThan(specs.length * 2);
  expect(stats.resCalls).toBeLessThan(polls / 2);
});

test("a request-level error reaches every task of the batch", async () => {
  const provider = createProviderClient({ url: emu.url, timeoutMs: 5000 });
  const poller = createBulkPoller(provider);
  const r = await Promise.all(
    ["1001", "1002", "1003"].map((id) => poller.poll(id, "no-such-key-0000", "recaptcha_v2")),
  );
  expect(r.every((x) => x.kind === "error")).toBe(true);
});

test("reading prices: a bulk-polled answer carries the price the provider stated for its key and type, without a second read each", async () => {
  const client = createProviderClient({ url: emu.url, timeoutMs: 5000, readPrice: true });
  const poller = createBulkPoller(client);
  const submit = async (i: number) => {
    const r = await client.submit(
      toProviderParams({
        type: "recaptcha_v2",
        params: { sitekey: "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-", pageurl: `https://example.com/price/${i}` },
      }),
      KEY,
    );
    if (r.kind !== "ok") throw new Error(`submit: ${JSON.stringify(r)}`);
    return r.value;
  };
  // One answer read alone (get2): its price is learned.
  const first = await submit(0);
  await Bun.sleep(400);
  const alone = await poller.poll(first, KEY, "recaptcha_v2");
  expect(alone).toMatchObject({ kind: "ok", extra: { price: expect.anything() } });
  // 20 more, polled together once solved: one bulk request, each answer priced, no re-reads.
  const ids = await Promise.all(Array.from({ length: 20 }, (_, i) => submit(i + 1)));
  await Bun.sleep(400);
  emu.resetStats();
  const replies = await Promise.all(ids.map((id) => poller.poll(id, KEY, "recaptcha_v2")));
  for (const r of replies)
    expect(r).toMatchObject({
      kind: "ok",
      extra: { price: (alone as unknown as { extra: { price: unknown } }).extra.price },
    });
  expect(emu.stats().resCalls).toBe(1);
});

test("a quiet key's poll leaves at once; a busy key's polls wait for the next window and share it", async () => {
  const provider = createProviderClient({ url: emu.url, timeoutMs: 5000 });
  const poller = createBulkPoller(provider, { lingerMs: 200 });
  const ids = await Promise.all(
    specs.slice(40, 46).map(async (spec) => {
      const r = await provider.submit(toProviderParams(spec), KEY);
      if (r.kind !== "ok") throw new Error(`submit failed: ${JSON.stringify(r)}`);
      return r.value;
    }),
  );
  emu.resetStats();
  // Quiet: nothing sent for this key yet, so the poll is answered long before the 200 ms window.
  let t0 = performance.now();
  await poller.poll(ids[0]!, KEY, "recaptcha_v2");
  expect(performance.now() - t0).toBeLessThan(150);
  // Busy: the key sent a request just now, so these wait for the window's end and go as one.
  t0 = performance.now();
  await Promise.all(ids.slice(1).map((id) => poller.poll(id, KEY, "recaptcha_v2")));
  expect(performance.now() - t0).toBeGreaterThanOrEqual(150);
  expect(emu.stats().resCalls).toBe(2);
});
