import { afterAll, beforeAll, expect, test } from "bun:test";
import { fingerprintOf } from "@pipeline/emulator";
import { toProviderParams } from "@pipeline/shared/provider";
import type { TaskSpec, TaskView } from "@pipeline/shared/schemas";
import { api, PROVIDER_KEY, type Stack, startStack } from "./harness.ts";

let s: Stack;
beforeAll(async () => {
  s = await startStack({ emulator: { latencyMs: 20 }, solverEnv: { SOLVER_CONCURRENCY: "500" } });
});
afterAll(() => s.stop());

/** Task number i of a mixed set, each with params unique to it (so its provider fingerprint is too). */
function mixed(i: number): TaskSpec {
  const pageurl = `https://shop.example.com/checkout/${i}`;
  switch (i % 5) {
    case 0:
      return { type: "recaptcha_v2", params: { sitekey: "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-", pageurl } };
    case 1:
      return {
        type: "recaptcha_v3",
        params: { sitekey: "6LfB5_IbAAAAAMCtsjEHEHKqcB9iQocwwxTiihJu", pageurl, action: "checkout", min_score: 0.3 },
      };
    case 2:
      return { type: "turnstile", params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl } };
    case 3:
      return {
        type: "geetest",
        params: { gt: "81388ea1fc187e0c335c0a8907ff2625", challenge: `c${i.toString(16).padStart(31, "0")}`, pageurl },
      };
    default:
      return { type: "image", params: { body: Buffer.from(`captcha image ${i}`).toString("base64"), numeric: 1 } };
  }
}

test("a turnstile task is accepted (202) and ?wait returns it completed with the token the emulator issued", async () => {
  const spec: TaskSpec = {
    type: "turnstile",
    params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com/login" },
  };
  const sub = await api<{ id: string; status: string }>(s, "/v1/tasks", { method: "POST", body: spec });
  expect(sub.status).toBe(202);
  expect(sub.body.status).toBe("queued");
  const got = await api<TaskView>(s, `/v1/tasks/${sub.body.id}?wait=30`);
  expect(got.status).toBe(200);
  expect(got.body.status).toBe("completed");
  const [row] = await s.db.sql<{ provider_id: string }[]>`select provider_id from tasks where id = ${sub.body.id}`;
  const issued = await fetch(`${s.emu.url}/res.php`, {
    method: "POST",
    body: new URLSearchParams({ key: PROVIDER_KEY, action: "get", id: row!.provider_id, json: "1" }),
  });
  expect(got.body.result!.token).toBe(((await issued.json()) as { request: string }).request);
  expect(Date.parse(got.body.result!.expiresAt!)).toBeGreaterThan(Date.now() + 60_000);
}, 40_000);

test("1,000 tasks of mixed types submitted concurrently all complete, each submitted to the provider exactly once", async () => {
  s.emu.resetStats();
  const specs = Array.from({ length: 1000 }, (_, i) => mixed(i));
  const t0 = Date.now();
  const ids: string[] = [];
  for (let i = 0; i < specs.length; i += 100) {
    const batch = await Promise.all(
      specs.slice(i, i + 100).map((body) => api<{ id: string }>(s, "/v1/tasks", { method: "POST", body })),
    );
    for (const r of batch) {
      expect(r.status).toBe(202);
      ids.push(r.body.id);
    }
  }
  const accepted = Date.now() - t0;
  const views = await Promise.all(ids.map((id) => api<TaskView>(s, `/v1/tasks/${id}?wait=60`)));
  const elapsed = Date.now() - t0;
  const states = views.reduce<Record<string, number>>(
    (m, v) => ((m[v.body.status] = (m[v.body.status] ?? 0) + 1), m),
    {},
  );
  expect(states).toEqual({ completed: 1000 });
  const stats = s.emu.stats();
  const perTask = specs.map((spec) => {
    const form = toProviderParams(spec);
    return stats.byFingerprint[fingerprintOf(form.method!, form)] ?? 0;
  });
  expect(perTask.filter((n) => n !== 1)).toEqual([]);
  expect(stats.submissions).toBe(1000);
  expect(stats.duplicateFingerprints).toBe(0);
  console.log(
    `[e2e] 1000 mixed tasks: accepted in ${accepted} ms, all completed in ${elapsed} ms; provider submissions ${stats.submissions}, polls ${stats.polls}`,
  );
}, 120_000);

test("no API key, provider key or token appears in any log line", async () => {
  const logs = s.logs();
  expect(logs.length).toBeGreaterThan(0);
  expect(logs).not.toContain(s.apiKey);
  expect(logs).not.toContain(PROVIDER_KEY);
  const [row] = await s.db.sql<{ token: string }[]>`select token from tasks where token is not null limit 1`;
  expect(logs).not.toContain(row!.token);
});
