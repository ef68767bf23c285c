// The balance sampler: reads the provider's balance of the key in use (`res.php?action=getbalance`)
// and stores it as a sample (adapters/balances.ts), at most every `everyMs` per region across the
// fleet. 2Captcha counts getbalance toward its res.php calls per captcha, so it stays rare.
import type { Logger } from "@pipeline/shared/log";
import type { BalanceStore } from "../adapters/balances.ts";
import type { ProviderClient } from "../adapters/provider.ts";
import { readBalanceReply } from "../domain/balance-reply.ts";
import { providerName } from "../domain/charge.ts";
import type { KeyRing, ProviderKeyInUse } from "../domain/keyring.ts";

export interface BalanceSamplerDeps {
  store: BalanceStore;
  provider: Pick<ProviderClient, "balance">;
  keys: Pick<KeyRing, "current"> & Partial<Pick<KeyRing, "accounts">>;
  /** The provider URL's host: with the key's reference, the ledger's name of the account. */
  providerHost: string;
  /** Several accounts (PROVIDERS): each one's host by key reference. */
  hostOfRef?: (keyRef: string) => string;
  region: string;
  /** BALANCE_POLL_MS: the fleet samples at most this often per region. */
  everyMs: number;
  log: Logger;
  /** A sample stored (metrics, tests). */
  onSample?: (s: { provider: string; balanceMicros: number }) => void;
}

/**
 * Samples once if this solver's turn has come (the newest sample is older than `everyMs` and no
 * other solver of the region holds the turn). Never logs a key. Resolves whether it stored one.
 */
export async function sampleBalanceOnce(d: BalanceSamplerDeps): Promise<boolean> {
  // Every account's key in use (PROVIDERS), each with its own turn.
  let stored = false;
  for (const key of d.keys.accounts?.() ?? [d.keys.current()]) stored = (await sampleKey(d, key)) || stored;
  return stored;
}

async function sampleKey(d: BalanceSamplerDeps, key: ProviderKeyInUse): Promise<boolean> {
  const provider = providerName(d.hostOfRef?.(key.ref) ?? d.providerHost, key.ref);
  return d.store.sampleIfDue({ provider, keyRef: key.ref, region: d.region, everyMs: d.everyMs }, async () => {
    const reading = readBalanceReply(await d.provider.balance(key.value));
    if (!reading.ok) {
      d.log.warn({ provider, err: reading.error }, "balance sample: no balance read");
      return undefined;
    }
    d.onSample?.({ provider, balanceMicros: reading.micros });
    return reading.micros;
  });
}

/**
 * Tries a sample at once and then every half `everyMs` (with jitter, so solvers started together
 * do not all ask at once); the store's turn keeps the fleet to one sample per `everyMs`.
 * `everyMs` 0: never samples.
 */
export function startBalanceSampler(d: BalanceSamplerDeps): { stop(): Promise<void> } {
  if (d.everyMs <= 0) return { stop: async () => {} };
  let stopped = false;
  let running: Promise<unknown> = Promise.resolve();
  let wake: (() => void) | undefined;
  const loop = async () => {
    while (!stopped) {
      running = sampleBalanceOnce(d).catch((err: Error) =>
        d.log.warn({ err: err.message.slice(0, 200) }, "balance sample failed; the next turn retries"),
      );
      await running;
      if (stopped) break;
      const pause = (d.everyMs / 2) * (0.75 + Math.random() * 0.5);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, pause);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  };
  void loop();
  return {
    async stop() {
      stopped = true;
      wake?.();
      await running;
    },
  };
}
