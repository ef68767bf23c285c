// The gateway's 2Captcha-compatible facade, end to end: the unmodified official client
// @2captcha/captcha-solver, with only its host redirected to the gateway, gets its captchas
// solved by the real pipeline (gateway -> JetStream -> solver -> emulator as provider).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { redirect2captchaPreload } from "@pipeline/emulator";
import type { TaskView } from "@pipeline/shared/schemas";
import { api, ROOT, type Stack, startStack } from "./harness.ts";

const DRIVER = join(ROOT, "tests/facade/official-client.cjs");
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
// a tiny valid PNG (1x1)
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=",
  "base64",
);

interface ClientResult {
  name: string;
  ok: boolean;
  result?: { data: string; id: string; status: number; useragent?: string };
  error?: string;
  report?: string;
}
interface ClientOutput {
  results: ClientResult[];
  balance?: number;
  balanceError?: string;
}

/** Runs the official client under Node with the redirect preload pointing at the gateway. */
async function runOfficialClient(gatewayUrl: string, job: unknown): Promise<ClientOutput> {
  const proc = Bun.spawn(["node", "--require", redirect2captchaPreload, DRIVER], {
    cwd: ROOT,
    env: { ...process.env, TWOCAPTCHA_REDIRECT: gatewayUrl, FACADE_JOB: JSON.stringify(job) },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  if (code !== 0) throw new Error(`official client exited ${code}: ${err}`);
  const line = out.split("\n").find((l) => l.startsWith("FACADE_RESULT "));
  if (!line) throw new Error(`no result line from the official client: ${out}`);
  return JSON.parse(line.slice("FACADE_RESULT ".length)) as ClientOutput;
}

let s: Stack;
beforeAll(async () => {
  // 300 ms at the provider: the client's first polls (every 100 ms) meet CAPCHA_NOT_READY before the token
  s = await startStack({ region: "facade", emulator: { latencyMs: 300 } });
}, 60_000);
afterAll(() => s?.stop(), 30_000);

test("the unmodified official client solves reCAPTCHA v2, Turnstile and an image through the gateway", async () => {
  const out = await runOfficialClient(s.gatewayUrl, {
    key: s.apiKey,
    pollingFrequency: 100,
    report: "good",
    balance: true,
    tasks: [
      {
        name: "recaptcha",
        call: "recaptcha",
        params: { googlekey: "6LfD3PIbAAAAAJs_eEHvoOl75_83eXSqpPSRFJ_u", pageurl: "https://shop.example.com/login" },
      },
      {
        name: "turnstile",
        call: "cloudflareTurnstile",
        params: { sitekey: "0x4AAAAAAAVrOwQWPlm3Bnr5", pageurl: "https://shop.example.com/signup", action: "signup" },
      },
      {
        name: "image",
        call: "imageCaptcha",
        params: { body: PNG.toString("base64"), numeric: 1, min_len: 6, max_len: 6 },
      },
    ],
  });
  const byName = Object.fromEntries(out.results.map((r) => [r.name, r]));
  const expectedType = { recaptcha: "recaptcha_v2", turnstile: "turnstile", image: "image" } as const;
  for (const name of ["recaptcha", "turnstile", "image"] as const) {
    const r = byName[name]!;
    expect(r.error).toBeUndefined();
    expect(r.ok).toBe(true);
    // the id the client got from in.php and polled res.php with is our task id, a UUID
    expect(r.result!.id).toMatch(UUID);
    // an ordinary task: visible through the REST API, completed, with the very token the client got
    const v = await api<TaskView>(s, `/v1/tasks/${r.result!.id}`);
    expect(v.status).toBe(200);
    expect(v.body.type).toBe(expectedType[name]);
    expect(v.body.status).toBe("completed");
    expect(r.result!.data).toBe(v.body.result!.token);
    const [row] = await s.db.sql<
      { token: string; user_agent: string | null }[]
    >`select token, user_agent from tasks where id = ${r.result!.id}`;
    expect(r.result!.data).toBe(row!.token);
    expect(r.report).toBe("OK_REPORT_RECORDED");
  }
  // the provider's answers, carried through the pipeline
  expect(byName.recaptcha!.result!.data).toStartWith("03AGdBq2-EMU-TOKEN-");
  expect(byName.turnstile!.result!.data).toStartWith("0.EMU-TOKEN-");
  expect(byName.turnstile!.result!.useragent).toStartWith("Mozilla/5.0");
  expect(byName.image!.result!.data).toMatch(/^\d{6}$/);
  // one provider submission per task
  expect(s.emu.stats().submissions).toBe(3);
  expect(out.balance).toBe(1_000_000);
}, 60_000);

test("the official client sees the facade's refusals as the protocol's error codes, and nothing is created", async () => {
  const rows = async () => (await s.db.sql<{ n: number }[]>`select count(*)::int as n from tasks`)[0]!.n;
  const before = await rows();
  const out = await runOfficialClient(s.gatewayUrl, {
    key: "not-a-client-key",
    pollingFrequency: 100,
    tasks: [
      {
        name: "wrong-key",
        call: "recaptcha",
        params: { googlekey: "6LfD3PIbAAAAAJs_eEHvoOl75_83eXSqpPSRFJ_u", pageurl: "https://shop.example.com" },
      },
    ],
  });
  const ours = await runOfficialClient(s.gatewayUrl, {
    key: s.apiKey,
    pollingFrequency: 100,
    tasks: [
      {
        name: "pingback",
        call: "recaptcha",
        params: {
          googlekey: "6LfD3PIbAAAAAJs_eEHvoOl75_83eXSqpPSRFJ_u",
          pageurl: "https://shop.example.com",
          pingback: "https://me.example.com/cb",
        },
      },
      {
        name: "bad-pageurl",
        call: "cloudflareTurnstile",
        params: { sitekey: "0x4AAAAAAAVrOwQWPlm3Bnr5", pageurl: "not a url" },
      },
    ],
  });
  expect(out.results[0]).toMatchObject({ ok: false, error: "ERROR_WRONG_USER_KEY" });
  expect(ours.results.map((r) => [r.name, r.error])).toEqual([
    ["pingback", "ERROR_PINGBACK_NOT_SUPPORTED"],
    ["bad-pageurl", "ERROR_PAGEURL"],
  ]);
  expect(await rows()).toBe(before);
}, 30_000);

test("no client key or token appears in the gateway's log", async () => {
  const log = s.gateway.log();
  expect(log).not.toContain(s.apiKey);
  const [row] = await s.db.sql<{ token: string }[]>`select token from tasks where token is not null limit 1`;
  expect(log).not.toContain(row!.token);
  expect(log).toContain("facade report recorded");
});
