import type { EmulatorMethod } from "./settings.ts";

/** Money is kept in integer units of 0.00001 USD so balances never drift. */
export const UNITS_PER_DOLLAR = 100_000;

/** What a solved task costs, in units (2Captcha's list prices per solve). */
export const PRICE_UNITS: Record<EmulatorMethod, number> = {
  userrecaptcha: 299,
  userrecaptcha_v3: 299,
  turnstile: 145,
  geetest: 299,
  image: 100,
};

/** Dollars to units, rounded to the nearest unit. */
export function toUnits(dollars: number): number {
  return Math.round(dollars * UNITS_PER_DOLLAR);
}

/** Units as the provider prints money: `12.345`, `0.00299`, `100`. */
export function formatMoney(units: number): string {
  return String(Number((units / UNITS_PER_DOLLAR).toFixed(5)));
}
