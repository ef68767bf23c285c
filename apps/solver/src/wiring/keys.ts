// The provider key and the live-tunable timing: from the region's config bucket (zod-checked; an
// invalid revision is refused and the last good one stays), else from the environment. A new key
// rotates the key ring; a new timing is applied to the timing in use, which the worker reads.

import { bindBucket } from "@pipeline/shared/kv";
import type { Logger } from "@pipeline/shared/log";
import { type NatsConnection, TOPOLOGY_WAIT_MS } from "@pipeline/shared/nats";
import { buckets } from "@pipeline/shared/subjects";
import { keySource, type LiveConfig, startLiveConfig } from "../adapters/live-config.ts";
import type { SolverConfig } from "../config.ts";
import type { Breaker } from "../domain/breaker.ts";
import { createKeyRing, type KeyRing, type ProviderKeyInUse } from "../domain/keyring.ts";
import type { TimingInUse } from "../domain/timing.ts";
import type { Accounts } from "./accounts.ts";

export async function startKeys(d: {
  nc: NatsConnection;
  config: SolverConfig;
  timing: TimingInUse;
  makeBreaker: (key: ProviderKeyInUse) => Breaker;
  onRejected: () => void;
  accounts?: Accounts;
  log: Logger;
}): Promise<{ keyRing: KeyRing; liveConfig: LiveConfig }> {
  const { config, log } = d;
  let keys: KeyRing | undefined;
  const liveConfig = await startLiveConfig({
    // The operator's bucket (made by the administering side): bound, never created.
    kv: await bindBucket(d.nc, buckets.config(config.REGION), { waitMs: TOPOLOGY_WAIT_MS }),
    keys: keySource({ keyName: config.PROVIDER_KEY_NAME, key: config.PROVIDER_KEY, file: config.PROVIDER_KEYS_FILE }),
    defaultKeyName: config.PROVIDER_KEY_NAME,
    envTiming: {
      pollIntervalMs: config.POLL_INTERVAL_MS,
      maxPolls: config.MAX_POLLS,
      maxResubmits: config.MAX_RESUBMITS,
    },
    async apply(key, live) {
      d.timing.apply(live);
      if (!keys)
        keys = createKeyRing(
          { ...key, account: "default" },
          d.makeBreaker,
          d.accounts ? { extras: d.accounts.extras, terms: d.accounts.terms } : {},
        );
      else if (keys.current().ref !== key.ref) {
        log.warn(
          { from: keys.current().ref, to: key.ref, keyName: key.name },
          "provider key rotated: new calls use the new key",
        );
        keys.use({ ...key, account: "default" });
      }
    },
    onRejected: d.onRejected,
    log,
  });
  // startLiveConfig applies the first key before it returns.
  return { keyRing: keys!, liveConfig };
}
