// One reconciliation: the figures of every account over the window, compared (reconcile.ts).
import type postgres from "postgres";
import { readReconcileInputs } from "./figures.ts";
import { type Reconciliation, reconcile } from "./reconcile.ts";

export interface ReconcileRun {
  hours: number;
  toleranceMicros: number;
  accounts: Reconciliation[];
  /** Some account differs beyond the tolerance. */
  differs: boolean;
}

/** Reconciles the last `hours` of every account with a sample or a ledger entry in them. */
export async function runReconcile(sql: postgres.Sql, hours: number, toleranceMicros: number): Promise<ReconcileRun> {
  const accounts = (await readReconcileInputs(sql, hours)).map((i) => reconcile(i, toleranceMicros));
  return { hours, toleranceMicros, accounts, differs: accounts.some((a) => a.agrees === false) };
}
