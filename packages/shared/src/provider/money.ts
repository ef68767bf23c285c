import type { TaskType } from "../schemas/task-types.ts";

/** Money in the pipeline: integer micro-dollars (1 USD = 1,000,000), never summed as floats. */
export const MICROS_PER_DOLLAR = 1_000_000;

const DECIMAL = /^(\d{1,9})(?:\.(\d{1,12}))?$/;

/**
 * A price as the provider prints it (`0.00299`, `"1"`, `0.0029`) in micro-dollars, read from its
 * decimal text (no float arithmetic; digits beyond the sixth decimal are rounded half up).
 * Undefined for anything that is not a non-negative decimal.
 */
export function priceMicros(price: unknown): number | undefined {
  const text = typeof price === "number" ? (Number.isFinite(price) ? price.toFixed(12) : "") : price;
  if (typeof text !== "string") return undefined;
  const m = DECIMAL.exec(text.trim());
  if (!m) return undefined;
  const frac = (m[2] ?? "").padEnd(7, "0");
  const micros = Number(m[1]) * MICROS_PER_DOLLAR + Number(frac.slice(0, 6));
  return Number(frac[6]) >= 5 ? micros + 1 : micros;
}

/**
 * A balance as the provider prints it (`getbalance`: `3.28570`, `-0.5` for an account in debt) in
 * micro-dollars, read like a price from its decimal text (no float arithmetic). Undefined for
 * anything that is not a decimal.
 */
export function balanceMicros(balance: unknown): number | undefined {
  if (typeof balance === "string" && balance.trim().startsWith("-")) {
    const m = priceMicros(balance.trim().slice(1));
    return m === undefined ? undefined : -m;
  }
  if (typeof balance === "number" && balance < 0) {
    const m = priceMicros(-balance);
    return m === undefined ? undefined : -m;
  }
  return priceMicros(balance);
}

/** Micro-dollars as dollars with six decimals (`0.002990`): for replies and reports, never for sums. */
export function formatMicros(micros: number): string {
  const sign = micros < 0 ? "-" : "";
  const abs = Math.abs(micros);
  return `${sign}${Math.floor(abs / MICROS_PER_DOLLAR)}.${String(abs % MICROS_PER_DOLLAR).padStart(6, "0")}`;
}

/** 2Captcha's list prices per solve, in micro-dollars: the estimate where the provider says no price. */
export const LIST_PRICE_MICROS: Record<TaskType, number> = {
  recaptcha_v2: 2990,
  recaptcha_v3: 2990,
  turnstile: 1450,
  geetest: 2990,
  image: 1000,
};
