// The balance sampler from the solver's parts.
import type { Database } from "@pipeline/shared/db";
import type { Logger } from "@pipeline/shared/log";
import { createBalanceStore } from "../adapters/balances.ts";
import type { ProviderClient } from "../adapters/provider.ts";
import { startBalanceSampler } from "../balance/sampler.ts";
import type { SolverConfig } from "../config.ts";
import type { KeyRing } from "../domain/keyring.ts";
import type { Accounts } from "./accounts.ts";

/**
 * Starts sampling every account's balance (BALANCE_POLL_MS; 0: off) and hands the region's newest
 * samples to the key ring every quarter of it (at least every 2 s): routing passes over an account
 * below its balance floor (docs/providers.md).
 */
export function startBalances(d: {
  config: SolverConfig;
  database: Database;
  provider: ProviderClient;
  keyRing: KeyRing;
  accounts: Accounts;
  log: Logger;
}) {
  const store = createBalanceStore(d.database.sql);
  const sampler = startBalanceSampler({
    store,
    provider: d.provider,
    keys: d.keyRing,
    providerHost: new URL(d.config.PROVIDER_URL).host,
    hostOfRef: d.accounts.hostOfRef,
    region: d.config.REGION,
    everyMs: d.config.BALANCE_POLL_MS,
    log: d.log,
  });
  const refresh = () =>
    store
      .latest(d.config.REGION)
      .then((b) => d.keyRing.setBalances(b))
      .catch((err: Error) => d.log.warn({ err: err.message.slice(0, 200) }, "balance samples not read"));
  const timer =
    d.config.BALANCE_POLL_MS > 0 ? setInterval(refresh, Math.max(2000, d.config.BALANCE_POLL_MS / 4)) : undefined;
  if (timer) void refresh();
  return {
    async stop() {
      clearInterval(timer);
      await sampler.stop();
    },
  };
}
