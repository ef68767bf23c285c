// The provider accounts from the configuration: PROVIDER_URL's ("default", its key rotatable)
// and PROVIDERS' further ones. What each call needs of an account is looked up by its key:
// the URL a request goes to, the host the ledger names, the thread plan the slots lease, the
// prices routing compares (docs/providers.md).
import { LIST_PRICE_MICROS, MICROS_PER_DOLLAR } from "@pipeline/shared/provider";
import type { TaskType } from "@pipeline/shared/schemas";
import type { SolverConfig } from "../config.ts";
import { type AccountTerms, keyInUse, type ProviderKeyInUse } from "../domain/keyring.ts";

export interface Accounts {
  /** PROVIDERS' keys (fixed for the process's life). */
  extras: ProviderKeyInUse[];
  terms(account: string): AccountTerms;
  /** The URL of the account a key belongs to (PROVIDER_URL for any other key: the rotatable one). */
  urlOfKey(key: string): string;
  /** The ledger's host of the account a key reference belongs to. */
  hostOfRef(ref: string): string;
  /** The thread plan of the account a key reference belongs to (pay per solve: a plan no one reaches). */
  threadsOfRef(ref: string): number;
  /** Micro-dollars per solve by type of the account a key reference belongs to (the ledger's estimate). */
  pricesOfRef(ref: string): Record<TaskType, number>;
}

/** A pay-per-solve account has no plan: its units are bounded only by the solvers' own limits. */
export const NO_PLAN_THREADS = 100_000;

const priceTable = (dollars: Partial<Record<TaskType, number>> | undefined): Record<TaskType, number> => {
  const out = { ...LIST_PRICE_MICROS };
  for (const [type, d] of Object.entries(dollars ?? {})) out[type as TaskType] = Math.round(d * MICROS_PER_DOLLAR);
  return out;
};

export function accountsOf(config: SolverConfig): Accounts {
  const extras = config.accounts.map((a) => ({ ...keyInUse(a.id, a.key), account: a.id }));
  const byId = new Map(config.accounts.map((a) => [a.id, a]));
  const byRef = new Map(extras.map((k) => [k.ref, byId.get(k.account)!]));
  const byKey = new Map(config.accounts.map((a) => [a.key, a]));
  const defaultPrices = priceTable(config.PROVIDER_PRICES);
  const defaultHost = new URL(config.PROVIDER_URL).host;
  return {
    extras,
    terms(account) {
      const a = byId.get(account);
      const floor = (dollars: number) => Math.round(dollars * MICROS_PER_DOLLAR);
      return a
        ? {
            id: a.id,
            priority: a.priority,
            priceMicros: priceTable(a.prices),
            floorMicros: floor(a.balanceFloor ?? config.PROVIDER_BALANCE_FLOOR),
          }
        : { id: "default", priority: 0, priceMicros: defaultPrices, floorMicros: floor(config.PROVIDER_BALANCE_FLOOR) };
    },
    urlOfKey: (key) => byKey.get(key)?.url ?? config.PROVIDER_URL,
    hostOfRef: (ref) => {
      const a = byRef.get(ref);
      return a ? new URL(a.url).host : defaultHost;
    },
    threadsOfRef: (ref) => {
      const a = byRef.get(ref);
      return a ? (a.threads ?? NO_PLAN_THREADS) : config.PROVIDER_THREADS;
    },
    pricesOfRef: (ref) => {
      const a = byRef.get(ref);
      return a ? priceTable(a.prices) : defaultPrices;
    },
  };
}
