// The balance sampler from the solver's parts.
import type { Database } from "@pipeline/shared/db";
import type { Logger } from "@pipeline/shared/log";
import { createBalanceStore } from "../adapters/balances.ts";
import type { ProviderClient } from "../adapters/provider.ts";
import { startBalanceSampler } from "../balance/sampler.ts";
import type { SolverConfig } from "../config.ts";
import type { KeyRing } from "../domain/keyring.ts";
import { accountsOf } from "./accounts.ts";

/** Starts sampling the balance of the key in use (BALANCE_POLL_MS; 0: off). */
export function startBalances(d: {
  config: SolverConfig;
  database: Database;
  provider: ProviderClient;
  keyRing: KeyRing;
  log: Logger;
}) {
  return startBalanceSampler({
    store: createBalanceStore(d.database.sql),
    provider: d.provider,
    keys: d.keyRing,
    providerHost: new URL(d.config.PROVIDER_URL).host,
    hostOfRef: accountsOf(d.config).hostOfRef,
    region: d.config.REGION,
    everyMs: d.config.BALANCE_POLL_MS,
    log: d.log,
  });
}
