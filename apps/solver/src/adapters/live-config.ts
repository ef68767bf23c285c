import { readFileSync } from "node:fs";
import type { KV } from "@nats-io/kv";
import {
  latestValidConfig,
  type Parsed,
  type ProviderKeys,
  parseProviderKeys,
  parseSolverConfig,
  SOLVER_CONFIG_KEY,
} from "@pipeline/shared/kv";
import type { Logger } from "@pipeline/shared/log";
import { keyInUse, type ProviderKeyInUse } from "../domain/keyring.ts";
import { type LiveTiming, resolveRuntimeConfig } from "../domain/runtime-config.ts";

/** The provider keys this process may use: PROVIDER_KEY (under its name) plus PROVIDER_KEYS_FILE, re-read on every config change. */
export function keySource(o: {
  keyName: string;
  key?: string | undefined;
  file?: string | undefined;
}): () => Parsed<ProviderKeys> {
  return () => {
    const keys: ProviderKeys = o.key ? { [o.keyName]: o.key } : {};
    if (!o.file) return { ok: true, value: keys };
    let text: string;
    try {
      text = readFileSync(o.file, "utf8");
    } catch (err) {
      return {
        ok: false,
        error: `PROVIDER_KEYS_FILE: cannot read (${(err as NodeJS.ErrnoException).code ?? "error"})`,
      };
    }
    const r = parseProviderKeys(text);
    return r.ok ? { ok: true, value: { ...keys, ...r.value } } : { ok: false, error: `PROVIDER_KEYS_FILE: ${r.error}` };
  };
}

export interface LiveConfigStatus {
  /** The config revision in use (null: none stored, the environment's defaults). */
  revision: number | null;
  /** The newest revision refused, while it is the newest. */
  rejected: { revision: number; error: string } | null;
}

export interface LiveConfig {
  status(): LiveConfigStatus;
  stop(): void;
}

export interface LiveConfigDeps {
  kv: KV;
  keys: () => Parsed<ProviderKeys>;
  /** The key used when no valid revision is stored. */
  defaultKeyName: string;
  envTiming: LiveTiming;
  /** Puts a resolved config in use (switch the key ring, update the timing). */
  apply(key: ProviderKeyInUse, timing: LiveTiming, revision: number | null): Promise<void>;
  onRejected?(revision: number, error: string): void;
  log: Logger;
}

/**
 * Follows the region's solver config in KV. Each revision is parsed (zod) and resolved against
 * the key file before it is used; a revision that fails either is refused and the last good one
 * stays in use. On start the newest valid revision is used (an invalid newest one is skipped).
 */
export async function startLiveConfig(d: LiveConfigDeps): Promise<LiveConfig> {
  const status: LiveConfigStatus = { revision: null, rejected: null };
  const keysNow = () => {
    const k = d.keys();
    if (!k.ok) throw new Error(k.error);
    return k.value;
  };
  const initial = await latestValidConfig(d.kv);
  const resolved = initial ? resolveRuntimeConfig(initial.config, keysNow(), d.envTiming) : undefined;
  if (initial && resolved?.ok) {
    await d.apply(resolved.key, resolved.timing, initial.revision);
    status.revision = initial.revision;
  } else {
    if (initial && resolved && !resolved.ok)
      d.log.error(
        { revision: initial.revision, error: resolved.error },
        "stored solver config refused; using the environment's key",
      );
    const value = keysNow()[d.defaultKeyName];
    if (value === undefined)
      throw new Error(
        `PROVIDER_KEY: no provider key named '${d.defaultKeyName}' (set PROVIDER_KEY or PROVIDER_KEYS_FILE)`,
      );
    await d.apply(keyInUse(d.defaultKeyName, value), d.envTiming, null);
  }
  const reject = (revision: number, error: string) => {
    status.rejected = { revision, error };
    d.log.error({ revision, error }, "solver config refused; the last good one stays in use");
    d.onRejected?.(revision, error);
  };
  const watch = await d.kv.watch({ key: SOLVER_CONFIG_KEY });
  void (async () => {
    for await (const e of watch) {
      if (status.revision !== null && e.revision <= status.revision) continue;
      if (status.rejected && e.revision <= status.rejected.revision) continue;
      if (e.operation !== "PUT") {
        reject(e.revision, "(document): deleted");
        continue;
      }
      const parsed = parseSolverConfig(e.value);
      if (!parsed.ok) {
        reject(e.revision, parsed.error);
        continue;
      }
      const keys = d.keys();
      if (!keys.ok) {
        reject(e.revision, keys.error);
        continue;
      }
      const r = resolveRuntimeConfig(parsed.value, keys.value, d.envTiming);
      if (!r.ok) {
        reject(e.revision, r.error);
        continue;
      }
      try {
        await d.apply(r.key, r.timing, e.revision);
      } catch (err) {
        reject(e.revision, `apply: ${(err as Error).message.slice(0, 200)}`);
        continue;
      }
      status.revision = e.revision;
      status.rejected = null;
      d.log.info(
        {
          revision: e.revision,
          keyName: r.key.name,
          keyRef: r.key.ref,
          changedBy: parsed.value.changedBy,
          timing: r.timing,
        },
        "solver config applied",
      );
    }
  })().catch((err: Error) => d.log.error({ err: err.message }, "config watch ended"));
  return { status: () => ({ ...status }), stop: () => watch.stop() };
}
