"use strict";
/**
 * Drives the unmodified official client `@2captcha/captcha-solver` and prints one result line.
 * Run it with the emulator's redirect preload, so that its hard-coded https://2captcha.com reaches
 * the gateway's facade:
 *
 *   TWOCAPTCHA_REDIRECT=http://127.0.0.1:PORT FACADE_JOB='{...}' \
 *     node --require <redirect2captchaPreload> tests/facade/official-client.cjs
 *
 * FACADE_JOB: { key, pollingFrequency, tasks: [{ name, call, params }], report?: "good"|"bad", balance?: boolean }
 *   call is a Solver method (recaptcha, cloudflareTurnstile, imageCaptcha, ...); with `report`,
 *   each solved task is then reported through goodReport/badReport.
 * Output: one stdout line `FACADE_RESULT {"results":[{name, ok, result?, error?, report?}], balance?, balanceError?}`.
 *   The marker matters: the client's APIError console.logs unknown codes to stdout.
 */
const { Solver } = require("@2captcha/captcha-solver");

const message = (err) => String((err && (err.err || err.message)) || err);

async function main() {
  const job = JSON.parse(process.env.FACADE_JOB || "{}");
  const solver = new Solver(job.key, job.pollingFrequency);
  const results = [];
  for (const task of job.tasks || []) {
    try {
      const result = await solver[task.call](task.params);
      const entry = { name: task.name, ok: true, result };
      if (job.report) {
        try {
          entry.report = await (job.report === "bad" ? solver.badReport(result.id) : solver.goodReport(result.id));
        } catch (err) {
          entry.report = `failed: ${message(err)}`;
        }
      }
      results.push(entry);
    } catch (err) {
      results.push({ name: task.name, ok: false, error: message(err) });
    }
  }
  const out = { results };
  if (job.balance) {
    try {
      out.balance = await solver.balance();
    } catch (err) {
      out.balanceError = message(err);
    }
  }
  process.stdout.write(`FACADE_RESULT ${JSON.stringify(out)}\n`);
}

main().catch((err) => {
  process.stderr.write(`${String((err && err.stack) || err)}\n`);
  process.exit(1);
});
