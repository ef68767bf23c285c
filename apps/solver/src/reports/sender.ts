// The report sender: forwards the clients' reports (stored by the gateway) to the provider with
// the key in use, books a bad one's refund, counts the verdicts for the acceptance rates.
import type { Logger } from "@pipeline/shared/log";
import type { TaskType } from "@pipeline/shared/schemas";
import type { ProviderClient } from "../adapters/provider.ts";
import type { DueReport, ReportQueue } from "../adapters/reports.ts";
import { type LedgerContext, providerName } from "../domain/charge.ts";
import type { KeyRing } from "../domain/keyring.ts";
import { reportOutcome } from "../domain/report-outcome.ts";

export interface ReportSenderDeps {
  queue: ReportQueue;
  provider: ProviderClient;
  keys: KeyRing;
  ledger: LedgerContext;
  log: Logger;
  /** A report the provider recorded, for the acceptance rates (Prometheus). */
  onRecorded?: (r: DueReport, labels: { provider: string; version: string }) => void;
  pollMs: number;
  batch: number;
  maxAttempts: number;
  retryBaseMs: number;
  retryMaxMs: number;
}

/** How long a taken report is held from other solvers while its call runs. */
const HOLD_MS = 60_000;

/**
 * Sends due reports every `pollMs` until stopped. Only the key in use calls the provider: a report
 * of a task solved with a key rotated away waits (it is refused by the window in the end). Never
 * logs a key; at most one call per report in flight fleet-wide (the hold).
 */
export function startReportSender(d: ReportSenderDeps): { stop(): Promise<void>; sendDue(): Promise<number> } {
  let stopped = false;
  let running: Promise<number> = Promise.resolve(0);
  const sendDue = async (): Promise<number> => {
    // Each account's reports with its own key (PROVIDERS: the one that solved the task).
    let n = 0;
    for (const key of d.keys.accounts()) {
      const due = await d.queue.take(key.ref, d.batch, HOLD_MS);
      await Promise.all(due.map((r) => sendOne(d, r, key.value)));
      n = Math.max(n, due.length);
    }
    return n;
  };
  const loop = async () => {
    while (!stopped) {
      running = sendDue().catch((err) => {
        d.log.warn({ err: (err as Error).message }, "report sender: a round failed; next round retries");
        return 0;
      });
      const n = await running;
      if (!stopped && n < d.batch) await Bun.sleep(d.pollMs);
    }
  };
  void loop();
  return {
    async stop() {
      stopped = true;
      await running;
    },
    sendDue,
  };
}

async function sendOne(d: ReportSenderDeps, r: DueReport, keyValue: string): Promise<void> {
  const reply = await d.provider.report(r.providerTaskId, r.accepted, keyValue);
  const outcome = reportOutcome(reply, r.attempts, {
    maxAttempts: d.maxAttempts,
    baseMs: d.retryBaseMs,
    maxMs: d.retryMaxMs,
  });
  const provider =
    r.provider ?? providerName(d.ledger.hostOfRef?.(r.providerKeyRef) ?? d.ledger.providerHost, r.providerKeyRef);
  switch (outcome.kind) {
    case "recorded":
      await d.queue.recorded(r, outcome.reply, {
        provider,
        region: d.ledger.region,
        solverVersion: d.ledger.solverVersion,
        estimateMicros:
          (d.ledger.estimatesOfRef?.(r.providerKeyRef) ?? d.ledger.estimates)[r.taskType as TaskType] ?? 0,
      });
      d.onRecorded?.(r, { provider, version: r.solverVersion ?? d.ledger.solverVersion });
      return;
    case "refused":
      d.log.info({ taskId: r.taskId, reply: outcome.reply }, "report refused by the provider; not sent again");
      await d.queue.refused(r, outcome.reply);
      return;
    case "retry":
      await d.queue.retry(r, outcome.reply, outcome.delayMs);
  }
}
