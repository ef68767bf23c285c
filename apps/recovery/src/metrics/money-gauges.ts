// The operator's money as gauges: each provider account's newest balance, its last hour's spend
// rate and the hours that leaves (read at scrape time from the ledger and the balance samples),
// and the last reconciliation's figures (set by the service's daily run).
import { Gauge, type Registry } from "@pipeline/shared/metrics";
import type { Forecast } from "../money/forecast.ts";
import type { ReconcileRun } from "../money/run-reconcile.ts";

/** What the service's reconciliation reports into. */
export interface ReconcileMetrics {
  reconciled(run: ReconcileRun): void;
}

/**
 * `pipeline_provider_balance_micros`, `pipeline_provider_spend_micros_per_hour` and
 * `pipeline_provider_balance_hours_left` per `provider`, from one read per scrape. An account
 * without a sample has no balance series; one that spent nothing in the last hour has no
 * hours-left series (unbounded): an alert on it cannot fire for an idle account.
 */
export function balanceGauges(registry: Registry, read: () => Promise<Forecast[]>): void {
  let pending: Promise<Forecast[]> | undefined;
  const reading = () =>
    (pending ??= read()
      .catch(() => [])
      .finally(() => setTimeout(() => (pending = undefined), 0)));
  const figures: Array<[string, string, (f: Forecast) => number | null]> = [
    [
      "pipeline_provider_balance_micros",
      "The provider account's balance at its newest sample, micro-dollars",
      (f) => f.balanceMicros,
    ],
    [
      "pipeline_provider_spend_micros_per_hour",
      "The ledger's net spend (charges less refunds) of the account over the last hour, micro-dollars",
      (f) => f.spendPerHourMicros,
    ],
    [
      "pipeline_provider_balance_hours_left",
      "Hours the balance lasts at the last hour's spend (absent: nothing spent, or no sample)",
      (f) => f.hoursLeft,
    ],
  ];
  for (const [name, help, pick] of figures)
    new Gauge({
      name,
      help,
      labelNames: ["provider"],
      registers: [registry],
      async collect() {
        this.reset();
        for (const f of await reading()) {
          const v = pick(f);
          if (v !== null) this.set({ provider: f.provider }, v);
        }
      },
    });
}

/** `recovery_reconcile_*`: the last reconciliation per `provider`, and when it ran. */
export function reconcileGauges(registry: Registry): ReconcileMetrics {
  const gauge = (name: string, help: string) =>
    new Gauge({ name, help, labelNames: ["provider"], registers: [registry] });
  const difference = gauge(
    "recovery_reconcile_difference_micros",
    "The balance's fall less the ledger's net over the last reconciliation window (top-ups show negative), micro-dollars",
  );
  const ledgerNet = gauge(
    "recovery_reconcile_ledger_net_micros",
    "The ledger's net over the last reconciliation window",
  );
  const delta = gauge(
    "recovery_reconcile_balance_delta_micros",
    "How much the balance fell between the samples at the last reconciliation window's ends",
  );
  const lastRun = new Gauge({
    name: "recovery_reconcile_last_run_timestamp_seconds",
    help: "When the last reconciliation ran (unix seconds)",
    registers: [registry],
  });
  return {
    reconciled(run) {
      for (const g of [difference, ledgerNet, delta]) g.reset();
      for (const a of run.accounts) {
        ledgerNet.set({ provider: a.provider }, a.ledgerNetMicros);
        if (a.balanceDeltaMicros !== null) delta.set({ provider: a.provider }, a.balanceDeltaMicros);
        if (a.differenceMicros !== null) difference.set({ provider: a.provider }, a.differenceMicros);
      }
      lastRun.setToCurrentTime();
    },
  };
}
