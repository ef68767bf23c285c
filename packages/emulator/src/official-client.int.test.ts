import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { fileURLToPath } from "node:url";
import { redirect2captchaPreload } from "./index.ts";
import { type Harness, PNG_1X1, startEmulator } from "./testing/emulator-harness.ts";

const CLIENT_SCRIPT = fileURLToPath(new URL("./testing/solve-with-official-client.cjs", import.meta.url));
const KEY = "official-client-key";

interface ClientResult {
  name: string;
  ok: boolean;
  result?: { data: string; id: string; status: number; useragent?: string };
  error?: string;
}
interface ClientOutput {
  results: ClientResult[];
  balance?: number;
  balanceError?: string;
}

/** Runs the unmodified @2captcha/captcha-solver under Node with the redirect preload. */
async function runOfficialClient(emulatorUrl: string, job: unknown): Promise<ClientOutput> {
  const proc = Bun.spawn(["node", "--require", redirect2captchaPreload, CLIENT_SCRIPT], {
    env: { ...process.env, TWOCAPTCHA_REDIRECT: emulatorUrl, EMU_JOB: JSON.stringify(job) },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  if (code !== 0) throw new Error(`official client exited ${code}: ${err}`);
  // the client's APIError console.logs unknown codes to stdout, so the result line is marked
  const line = out.split("\n").find((l) => l.startsWith("EMU_RESULT "));
  if (!line) throw new Error(`no result line from the official client: ${out}`);
  return JSON.parse(line.slice("EMU_RESULT ".length)) as ClientOutput;
}

describe("the official @2captcha/captcha-solver client against the emulator", () => {
  let h: Harness;
  // The emulator's clock is shifted forward by the test. Tasks take 60 s of emulator time, and
  // the test jumps the clock only after the client has polled a task and met CAPCHA_NOT_READY,
  // so the client's polling loop is exercised whatever the machine's speed.
  let shift = 0;
  const LATENCY = 60_000;
  beforeAll(async () => {
    h = await startEmulator({
      keys: { [KEY]: { threads: 5, balance: 3 } },
      latencyMs: LATENCY,
      now: () => Date.now() + shift,
    });
  });
  afterAll(async () => {
    await h.stop();
  });

  test("solves reCAPTCHA v2, Turnstile and an image; each answer is the one issued for its provider id", async () => {
    let running = true;
    const releaser = (async () => {
      while (running) {
        const { pollsByProviderId } = h.emulator.stats();
        for (const [id, polls] of Object.entries(pollsByProviderId)) {
          const task = h.emulator.task(id);
          if (task && polls >= 1 && task.readyAt > Date.now() + shift) shift += LATENCY;
        }
        await Bun.sleep(5);
      }
    })();
    const out = await runOfficialClient(h.url, {
      key: KEY,
      pollingFrequency: 50,
      balance: true,
      tasks: [
        {
          name: "recaptcha",
          call: "recaptcha",
          params: { googlekey: "6LfD3PIbAAAAAJs_eEHvoOl75_83eXSqpPSRFJ_u", pageurl: "https://example.test/rc" },
        },
        {
          name: "turnstile",
          call: "cloudflareTurnstile",
          params: { sitekey: "0x4AAAAAAAVrOwQWPlm3Bnr5", pageurl: "https://example.test/ts" },
        },
        { name: "image", call: "imageCaptcha", params: { body: PNG_1X1.toString("base64"), numeric: 1 } },
      ],
    }).finally(() => {
      running = false;
    });
    await releaser;

    const byName = Object.fromEntries(out.results.map((r) => [r.name, r]));
    for (const name of ["recaptcha", "turnstile", "image"]) {
      const r = byName[name]!;
      expect(r.error).toBeUndefined();
      expect(r.ok).toBe(true);
      const task = h.emulator.task(r.result!.id)!;
      expect(task).toBeDefined();
      expect(r.result!.data).toBe(task.answer!);
    }
    expect(byName.recaptcha!.result!.data).toStartWith(`03AGdBq2-EMU-TOKEN-${byName.recaptcha!.result!.id}-`);
    expect(byName.turnstile!.result!.useragent).toStartWith("Mozilla/5.0");
    expect(byName.image!.result!.data).toMatch(/^\d{6}$/);

    // each task was polled at least once before it was ready (CAPCHA_NOT_READY), then read
    const stats = h.emulator.stats();
    expect(stats.submissions).toBe(3);
    for (const r of out.results) expect(stats.pollsByProviderId[r.result!.id]).toBeGreaterThanOrEqual(2);
    // 3 - 0.00299 - 0.00145 - 0.001
    expect(out.balance).toBe(2.99456);
  });

  test("the client sees the emulator's errors as APIError codes", async () => {
    const out = await runOfficialClient(h.url, {
      key: "not-a-valid-key",
      pollingFrequency: 50,
      balance: true,
      tasks: [{ name: "recaptcha", call: "recaptcha", params: { googlekey: "g", pageurl: "https://example.test" } }],
    });
    expect(out.results[0]).toMatchObject({ ok: false, error: "ERROR_WRONG_USER_KEY" });
    // client quirk: balance() rethrows from its own catch, so the error carries the raw JSON body
    expect(out.balanceError).toBe('{"status":0,"request":"ERROR_WRONG_USER_KEY"}');
  });

  test("the preload redirects https.get(url-string) to 2captcha.com and leaves other hosts alone", async () => {
    const script = `
      const https = require("node:https");
      const out = {};
      https.get("https://2captcha.com/res.php?key=${KEY}&action=getbalance&json=1", (res) => {
        let body = "";
        res.on("data", (c) => (body += c));
        res.on("end", () => {
          out.redirected = { status: res.statusCode, body };
          https.get("https://127.0.0.1:1/res.php").on("error", (e) => {
            out.otherHostError = e.code;
            console.log(JSON.stringify(out));
          });
        });
      });`;
    const proc = Bun.spawn(["node", "--require", redirect2captchaPreload, "-e", script], {
      env: { ...process.env, TWOCAPTCHA_REDIRECT: h.url },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
    expect(code).toBe(0);
    const parsed = JSON.parse(out) as { redirected: { status: number; body: string }; otherHostError: string };
    expect(parsed.redirected.status).toBe(200);
    expect(JSON.parse(parsed.redirected.body)).toMatchObject({ status: 1 });
    expect(parsed.otherHostError).toBe("ECONNREFUSED");
  });
});
