// The report sender from the solver's parts.
import type { Database } from "@pipeline/shared/db";
import type { Logger } from "@pipeline/shared/log";
import type { SolverMetrics } from "../adapters/metrics.ts";
import type { ProviderClient } from "../adapters/provider.ts";
import { createReportQueue } from "../adapters/reports.ts";
import type { SolverConfig } from "../config.ts";
import type { KeyRing } from "../domain/keyring.ts";
import { startReportSender } from "../reports/sender.ts";
import type { Accounts } from "./accounts.ts";
import { ledgerContextOf } from "./worker.ts";

/** Starts forwarding the clients' reports with the key in use; each recorded one counted for the acceptance rates. */
export function startReports(d: {
  config: SolverConfig;
  database: Database;
  provider: ProviderClient;
  keyRing: KeyRing;
  accounts: Accounts;
  metrics: SolverMetrics;
  log: Logger;
}) {
  const { config } = d;
  return startReportSender({
    queue: createReportQueue(d.database.db),
    provider: d.provider,
    keys: d.keyRing,
    ledger: ledgerContextOf(config, d.accounts),
    log: d.log,
    onRecorded: (r, l) =>
      d.metrics.reportRecorded({
        provider: l.provider,
        type: r.taskType,
        sitekey: r.sitekey ?? "",
        version: l.version,
        verdict: r.accepted ? "good" : "bad",
      }),
    pollMs: config.REPORT_POLL_MS,
    batch: 50,
    maxAttempts: config.REPORT_MAX_ATTEMPTS,
    retryBaseMs: config.RETRY_BASE_MS,
    retryMaxMs: config.RETRY_MAX_MS,
  });
}
