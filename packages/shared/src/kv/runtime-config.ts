import { z } from "zod";
import { describeIssues as describeZodIssues } from "../schemas/zod-issues.ts";

/** A provider key is named, never written: the name is looked up in the services' key file. */
export const KEY_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const keyName = z.string().regex(KEY_NAME, "letters, digits, '_' and '-', at most 64");

/**
 * The solver's runtime configuration, one JSON document under `solver` in the region's config
 * bucket. Only what may change without a restart lives here; unknown fields are refused (a typo
 * must not be silently ignored). Every revision says who wrote it and when.
 */
export const SolverRuntimeConfig = z
  .object({
    /** Name of the provider key every solver uses, looked up in PROVIDER_KEYS_FILE. */
    providerKey: keyName,
    pollIntervalMs: z.number().int().min(10).max(60_000).optional(),
    maxPolls: z.number().int().min(1).max(20).optional(),
    maxResubmits: z.number().int().min(0).max(20).optional(),
    changedBy: z.string().min(1).max(64),
    changedAt: z.iso.datetime(),
    reason: z.string().max(200).optional(),
  })
  .strict();
export type SolverRuntimeConfig = z.infer<typeof SolverRuntimeConfig>;

export type Parsed<T> = { ok: true; value: T } | { ok: false; error: string };

/** "field: message; field: message" — names the fields, never echoes values. */
export function describeIssues(error: z.ZodError): string {
  return describeZodIssues(error, "(document)");
}

/** Parses a stored revision (bytes from KV); garbage, bad JSON and bad fields are errors naming the field. */
export function parseSolverConfig(bytes: Uint8Array | string): Parsed<SolverRuntimeConfig> {
  let doc: unknown;
  try {
    doc = JSON.parse(typeof bytes === "string" ? bytes : new TextDecoder().decode(bytes));
  } catch {
    return { ok: false, error: "(document): not JSON" };
  }
  const r = SolverRuntimeConfig.safeParse(doc);
  return r.success ? { ok: true, value: r.data } : { ok: false, error: describeIssues(r.error) };
}

/** The key file the services read: `{ "<name>": "<provider key>" }`. */
export const ProviderKeysFile = z.record(keyName, z.string().min(1, "empty key"));
export type ProviderKeys = Record<string, string>;

/** Parses the key file's text; the error names the entry, never the key. */
export function parseProviderKeys(text: string): Parsed<ProviderKeys> {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return { ok: false, error: "(file): not JSON" };
  }
  const r = ProviderKeysFile.safeParse(doc);
  return r.success ? { ok: true, value: r.data } : { ok: false, error: describeIssues(r.error) };
}
