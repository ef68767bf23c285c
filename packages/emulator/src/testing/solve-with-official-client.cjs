"use strict";
/**
 * Drives the unmodified official client `@2captcha/captcha-solver` and prints one JSON line.
 * Run it with the redirect preload so its hard-coded https://2captcha.com reaches the emulator:
 *
 *   TWOCAPTCHA_REDIRECT=http://127.0.0.1:PORT EMU_JOB='{...}' \
 *     node --require ./redirect-2captcha.cjs ./solve-with-official-client.cjs
 *
 * EMU_JOB: { key, pollingFrequency, tasks: [{ name, call: "recaptcha"|"cloudflareTurnstile"|
 *            "imageCaptcha"|"geetest", params }], balance?: boolean }
 * Output:  one stdout line `EMU_RESULT {"results":[{name, ok, result?, error?}], balance?, balanceError?}`.
 *          The marker matters: the client's APIError console.logs unknown error strings to stdout.
 */
const { Solver } = require("@2captcha/captcha-solver");

async function main() {
  const job = JSON.parse(process.env.EMU_JOB || "{}");
  const solver = new Solver(job.key, job.pollingFrequency);
  const results = [];
  for (const task of job.tasks || []) {
    try {
      const result = await solver[task.call](task.params);
      results.push({ name: task.name, ok: true, result });
    } catch (err) {
      results.push({ name: task.name, ok: false, error: String((err && (err.err || err.message)) || err) });
    }
  }
  const out = { results };
  if (job.balance) {
    try {
      out.balance = await solver.balance();
    } catch (err) {
      out.balanceError = String((err && (err.err || err.message)) || err);
    }
  }
  process.stdout.write(`EMU_RESULT ${JSON.stringify(out)}\n`);
}

main().catch((err) => {
  process.stderr.write(`${String((err && err.stack) || err)}\n`);
  process.exit(1);
});
