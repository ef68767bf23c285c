// The solver's runtime config as the config bucket keeps it: every revision under one key, read
// back oldest first, written only after it parses (runtime-config.ts).
import type { KV, KvEntry } from "@nats-io/kv";
import { parseSolverConfig, type SolverRuntimeConfig } from "./runtime-config.ts";

export const SOLVER_CONFIG_KEY = "solver";

export interface ConfigRevision {
  revision: number;
  at: Date;
  operation: "PUT" | "DEL" | "PURGE";
  parsed: ReturnType<typeof parseSolverConfig>;
}

function toRevision(e: KvEntry): ConfigRevision {
  return {
    revision: e.revision,
    at: e.created,
    operation: e.operation,
    parsed: e.operation === "PUT" ? parseSolverConfig(e.value) : { ok: false, error: "(document): deleted" },
  };
}

/** Every kept revision of the solver config, oldest first. */
export async function configHistory(kv: KV): Promise<ConfigRevision[]> {
  const out: ConfigRevision[] = [];
  const it = await kv.history({ key: SOLVER_CONFIG_KEY });
  for await (const e of it) out.push(toRevision(e));
  return out.sort((a, b) => a.revision - b.revision);
}

/** The newest revision that parses, or undefined (no config stored, or none valid). */
export async function latestValidConfig(
  kv: KV,
): Promise<{ revision: number; config: SolverRuntimeConfig } | undefined> {
  const all = await configHistory(kv);
  for (let i = all.length - 1; i >= 0; i--) {
    const r = all[i]!;
    if (r.parsed.ok) return { revision: r.revision, config: r.parsed.value };
  }
  return undefined;
}

/** Stores a config after validating it; an invalid one is refused and nothing is written. */
export async function putSolverConfig(
  kv: KV,
  config: unknown,
): Promise<{ revision: number; config: SolverRuntimeConfig }> {
  const parsed = parseSolverConfig(JSON.stringify(config));
  if (!parsed.ok) throw new InvalidConfigError(parsed.error);
  const revision = await kv.put(SOLVER_CONFIG_KEY, JSON.stringify(parsed.value));
  return { revision, config: parsed.value };
}

export class InvalidConfigError extends Error {
  override name = "InvalidConfigError";
}
