import type { ProviderKeys, SolverRuntimeConfig } from "@pipeline/shared/kv";
import { keyInUse, type ProviderKeyInUse } from "./keyring.ts";

/** The live-tunable part of the handler's timing. */
export interface LiveTiming {
  pollIntervalMs: number;
  maxPolls: number;
  maxResubmits: number;
}

export type Applied = { ok: true; key: ProviderKeyInUse; timing: LiveTiming } | { ok: false; error: string };

/**
 * What a parsed config revision means for this process: the key it names (which must be in the
 * process's key file) and the timing, each field falling back to the environment's value.
 */
export function resolveRuntimeConfig(config: SolverRuntimeConfig, keys: ProviderKeys, envTiming: LiveTiming): Applied {
  const value = keys[config.providerKey];
  if (value === undefined)
    return { ok: false, error: `providerKey: no key named '${config.providerKey}' in this solver's key file` };
  return {
    ok: true,
    key: keyInUse(config.providerKey, value),
    timing: {
      pollIntervalMs: config.pollIntervalMs ?? envTiming.pollIntervalMs,
      maxPolls: config.maxPolls ?? envTiming.maxPolls,
      maxResubmits: config.maxResubmits ?? envTiming.maxResubmits,
    },
  };
}
