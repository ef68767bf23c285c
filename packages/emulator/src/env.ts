import { z } from "zod";
import { EmulatorConfigError, EmulatorMethod, type EmulatorOptions, fieldsOf, type KeyConfig } from "./settings.ts";

const KEY_ENTRY = /^([^:,\s]+):(\d+)(?::(\d+(?:\.\d+)?))?$/;

/** `key:threads[:balance]` entries, comma-separated; the message never repeats a key. */
const KeyList = z.string().transform((raw, ctx) => {
  const keys: Record<string, KeyConfig> = {};
  const entries = raw
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (entries.length === 0) {
    ctx.addIssue({ code: "custom", message: "expected at least one key:threads entry" });
    return z.NEVER;
  }
  for (const [i, entry] of entries.entries()) {
    const m = KEY_ENTRY.exec(entry);
    if (!m) {
      ctx.addIssue({ code: "custom", message: `entry ${i + 1} is not key:threads[:balance]` });
      return z.NEVER;
    }
    keys[m[1]!] = { threads: Number(m[2]), ...(m[3] !== undefined ? { balance: Number(m[3]) } : {}) };
  }
  return keys;
});

const int = (def: number, min: number, max: number) => z.coerce.number().int().min(min).max(max).default(def);

/** The emulator's environment, one zod parse; see README for the variables. */
export const EmulatorEnv = z.object({
  EMULATOR_HOST: z.string().min(1).default("127.0.0.1"),
  EMULATOR_PORT: int(18090, 0, 65535),
  EMULATOR_KEYS: KeyList.default(() => ({ "emulator-key": { threads: 50 } })),
  EMULATOR_LATENCY_MS: int(2000, 0, 600_000),
  EMULATOR_LATENCY_JITTER_MS: int(0, 0, 600_000),
  EMULATOR_MAX_IMAGE_BYTES: int(100 * 1024, 1, 64 * 1024 * 1024),
});
export type EmulatorEnv = z.infer<typeof EmulatorEnv>;

/** Dollars per solved task by method, as JSON (a second provider's prices). */
const PriceList = z.string().transform((raw, ctx) => {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    ctx.addIssue({ code: "custom", message: "not JSON" });
    return z.NEVER;
  }
  const r = z.partialRecord(EmulatorMethod, z.number().min(0).max(1000)).safeParse(parsed);
  if (!r.success) {
    ctx.addIssue({ code: "custom", message: `expected {"<method>": dollars}: ${r.error.issues[0]?.path.join(".")}` });
    return z.NEVER;
  }
  return r.data;
});

/**
 * A second provider in the same process (`npm run dev` runs two): another service with its own
 * keys, slower solves and higher prices, on EMULATOR_B_PORT. Unset port: none.
 */
export const SecondEmulatorEnv = z.object({
  EMULATOR_B_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  EMULATOR_B_KEYS: KeyList.default(() => ({ "emulator-key-b": { threads: 200 } })),
  EMULATOR_B_LATENCY_MS: int(4000, 0, 600_000),
  EMULATOR_B_PRICES: PriceList.default(() => ({
    userrecaptcha: 0.004,
    userrecaptcha_v3: 0.004,
    turnstile: 0.002,
    geetest: 0.004,
    image: 0.0015,
  })),
});

/** The second emulator's options, or undefined when EMULATOR_B_PORT is not set. */
export function loadSecondEmulatorEnv(env: Record<string, string | undefined>): EmulatorOptions | undefined {
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const r = SecondEmulatorEnv.safeParse(present);
  if (!r.success) {
    const lines = r.error.issues.map((i) => `  ${i.path.map(String).join(".")}: ${i.message}`);
    throw new EmulatorConfigError(`invalid emulator environment:\n${lines.join("\n")}`, fieldsOf(r.error));
  }
  const e = r.data;
  if (e.EMULATOR_B_PORT === undefined) return undefined;
  return {
    host: present.EMULATOR_HOST ?? "127.0.0.1",
    port: e.EMULATOR_B_PORT,
    keys: e.EMULATOR_B_KEYS,
    latencyMs: e.EMULATOR_B_LATENCY_MS,
    prices: e.EMULATOR_B_PRICES,
  };
}

/**
 * Reads emulator options from an environment. Throws EmulatorConfigError whose message names
 * each variable at fault and never its value (EMULATOR_KEYS holds secrets).
 */
export function loadEmulatorEnv(env: Record<string, string | undefined>): EmulatorOptions {
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const r = EmulatorEnv.safeParse(present);
  if (!r.success) {
    const lines = r.error.issues.map((i) => `  ${i.path.map(String).join(".")}: ${i.message}`);
    throw new EmulatorConfigError(`invalid emulator environment:\n${lines.join("\n")}`, fieldsOf(r.error));
  }
  const e = r.data;
  return {
    host: e.EMULATOR_HOST,
    port: e.EMULATOR_PORT,
    keys: e.EMULATOR_KEYS,
    latencyMs: e.EMULATOR_LATENCY_MS,
    latencyJitterMs: e.EMULATOR_LATENCY_JITTER_MS,
    maxImageBytes: e.EMULATOR_MAX_IMAGE_BYTES,
  };
}
