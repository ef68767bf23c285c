import { z } from "zod";
import { PRICE_UNITS, toUnits } from "./money.ts";

/** The task kinds the emulator distinguishes for latency and pricing. */
export const EmulatorMethod = z.enum(["userrecaptcha", "userrecaptcha_v3", "turnstile", "geetest", "image"]);
export type EmulatorMethod = z.infer<typeof EmulatorMethod>;

const Rate = z.number().min(0).max(1);
/** A provider code such as `ERROR_NO_SLOT_AVAILABLE`, `MAX_USER_TURN` or `ERROR: 1001`. */
const ProviderCode = z
  .string()
  .max(64)
  .regex(/^[A-Z][A-Z0-9_: ]*$/, "expected an upper-case provider code such as ERROR_NO_SLOT_AVAILABLE");
const Millis = z.number().int().min(0);

/**
 * The account's real capacity changing over time (every key alike): while a key holds at least
 * the current step's `threads` unsolved tasks, in.php answers ERROR_NO_SLOT_AVAILABLE (its own
 * thread limit still applies under it). The steps run from `startAt` (epoch ms; absent: 0, the
 * cycle aligned to the clock) one after the other, and again from the first with `repeat`
 * (default true); without it the last step holds for ever.
 */
export const CapacitySchedule = z.strictObject({
  steps: z
    .array(z.strictObject({ forMs: Millis.min(1), threads: z.number().int().min(0) }))
    .min(1)
    .max(64),
  startAt: Millis.optional(),
  repeat: z.boolean().optional(),
});
export type CapacitySchedule = z.infer<typeof CapacitySchedule>;

/** Fault injection knobs; every field is optional and absent means "no fault". */
export const FaultConfig = z.strictObject({
  /** Probability that in.php answers `errorCode` instead of accepting. */
  errorRate: Rate.optional(),
  /** Code for `errorRate`; default ERROR_NO_SLOT_AVAILABLE. */
  errorCode: ProviderCode.optional(),
  /** Probability that res.php get/get2 answers `pollErrorCode`. */
  pollErrorRate: Rate.optional(),
  /** Code for `pollErrorRate`; default ERROR_SERVER_ERROR. */
  pollErrorCode: ProviderCode.optional(),
  /** Probability, drawn at submit, that a finished task answers ERROR_CAPTCHA_UNSOLVABLE. */
  unsolvableRate: Rate.optional(),
  /** Probability of an HTML 500 page on any protocol call. */
  http500Rate: Rate.optional(),
  /** Epoch ms; until then every protocol call gets an HTML 503 page. */
  outageUntil: Millis.optional(),
  /** Delay added before every protocol reply. */
  slowResponseMs: Millis.max(60_000).optional(),
  /** A capacity that changes over time (CapacitySchedule): ERROR_NO_SLOT_AVAILABLE above it. */
  capacity: CapacitySchedule.optional(),
  /** Always answer this code on in.php / res.php. */
  forceCode: z.strictObject({ inPhp: ProviderCode.optional(), resPhp: ProviderCode.optional() }).optional(),
});
export type FaultConfig = z.infer<typeof FaultConfig>;

/** One valid API key: its concurrent thread limit and its starting balance (default 100). */
export const KeyConfig = z.strictObject({
  threads: z.number().int().min(0),
  balance: z.number().min(0).optional(),
});
export type KeyConfig = z.infer<typeof KeyConfig>;

/** Time from submit until the answer is ready: one number for all methods, or per method. */
export const LatencyConfig = z.union([Millis, z.partialRecord(EmulatorMethod, Millis)]);
export type LatencyConfig = z.infer<typeof LatencyConfig>;

/** The JSON-serialisable emulator options (what `POST /emulator/config` may change, minus host/port). */
export const EmulatorSettings = z.strictObject({
  host: z.string().min(1).optional(),
  port: z.number().int().min(0).max(65535).optional(),
  keys: z.record(z.string(), KeyConfig).optional(),
  latencyMs: LatencyConfig.optional(),
  latencyJitterMs: Millis.optional(),
  /** Cap on the decoded image size; default 100 kB (100 * 1024 bytes). */
  maxImageBytes: z.number().int().positive().optional(),
  faults: FaultConfig.optional(),
  /** Dollars per solved task by method (another provider's prices); absent methods: 2Captcha's list prices. */
  prices: z.partialRecord(EmulatorMethod, z.number().min(0).max(1000)).optional(),
});
export type EmulatorSettings = z.infer<typeof EmulatorSettings>;

/** What may change at runtime: everything but the listening address. */
export const EmulatorConfigPatch = EmulatorSettings.omit({ host: true, port: true });
export type EmulatorConfigPatch = z.infer<typeof EmulatorConfigPatch>;

/** Options of `createEmulator`: the settings plus injectable clock and randomness for tests. */
export interface EmulatorOptions extends EmulatorSettings {
  /** Clock in epoch ms; default Date.now. */
  now?: () => number;
  /** Uniform [0,1) source for fault rolls and jitter; default Math.random. */
  random?: () => number;
}

/** The key a default emulator accepts (50 threads), matching `main.ts`'s default. */
export const DEFAULT_KEYS: Record<string, KeyConfig> = { "emulator-key": { threads: 50 } };
/** Default decoded image cap: 100 kB. */
export const DEFAULT_MAX_IMAGE_BYTES = 100 * 1024;
/** Balance of a key whose config names none. */
export const DEFAULT_BALANCE = 100;

/** Settings with every default filled in; what the handlers read. */
export interface ResolvedSettings {
  keys: Record<string, KeyConfig>;
  latencyMs: LatencyConfig;
  latencyJitterMs: number;
  maxImageBytes: number;
  faults: FaultConfig;
  /** Units (0.00001 USD) per solved task by method. */
  priceUnits: Record<EmulatorMethod, number>;
}

/** Raised when options or a config patch do not validate; `fields` names each offending path. */
export class EmulatorConfigError extends Error {
  override name = "EmulatorConfigError";
  constructor(
    message: string,
    readonly fields: string[],
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Turns a zod error into the dotted field names at fault (unknown keys included). */
export function fieldsOf(error: z.ZodError): string[] {
  const out: string[] = [];
  for (const issue of error.issues) {
    const base = issue.path.map(String).join(".");
    if (issue.code === "unrecognized_keys") {
      for (const k of issue.keys) out.push(base ? `${base}.${k}` : k);
    } else {
      out.push(base || "(body)");
    }
  }
  return [...new Set(out)];
}

/**
 * Validates `input` with `schema`; throws an EmulatorConfigError naming the fields at fault.
 * Values never appear in the message (keys are secrets).
 */
export function parseSettings<S extends z.ZodType>(schema: S, input: unknown): z.infer<S> {
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  const fields = fieldsOf(r.error);
  throw new EmulatorConfigError(`invalid emulator config: ${fields.join(", ")}`, fields, { cause: r.error });
}

/** Fills defaults into validated settings. */
export function resolveSettings(s: EmulatorSettings): ResolvedSettings {
  return {
    keys: s.keys ?? DEFAULT_KEYS,
    latencyMs: s.latencyMs ?? 0,
    latencyJitterMs: s.latencyJitterMs ?? 0,
    maxImageBytes: s.maxImageBytes ?? DEFAULT_MAX_IMAGE_BYTES,
    faults: s.faults ?? {},
    priceUnits: priceUnitsOf(s.prices, PRICE_UNITS),
  };
}

/** The price list: the given dollars per method over `base`, in units. */
function priceUnitsOf(
  dollars: Partial<Record<EmulatorMethod, number>> | undefined,
  base: Record<EmulatorMethod, number>,
): Record<EmulatorMethod, number> {
  const out = { ...base };
  for (const [m, d] of Object.entries(dollars ?? {})) out[m as EmulatorMethod] = toUnits(d);
  return out;
}

/** Applies a patch: each field given replaces the current one (faults are replaced, not merged). */
export function applyPatch(current: ResolvedSettings, patch: EmulatorConfigPatch): ResolvedSettings {
  return {
    keys: patch.keys ?? current.keys,
    latencyMs: patch.latencyMs ?? current.latencyMs,
    latencyJitterMs: patch.latencyJitterMs ?? current.latencyJitterMs,
    maxImageBytes: patch.maxImageBytes ?? current.maxImageBytes,
    faults: patch.faults ?? current.faults,
    priceUnits: patch.prices ? priceUnitsOf(patch.prices, PRICE_UNITS) : current.priceUnits,
  };
}

/** Latency of one method under the current settings, before jitter. */
export function latencyFor(latency: LatencyConfig, method: EmulatorMethod): number {
  return typeof latency === "number" ? latency : (latency[method] ?? 0);
}
