// How long the provider balance lasts: the newest balance sample of each account against its spend
// rate over the last hour (the ledger's net charges). Pure: the figures are read in figures.ts.
import { formatMicros } from "@pipeline/shared/provider";

/** What is known of one provider account (the ledger's name: `host/key_…`). */
export interface AccountFigures {
  provider: string;
  /** The newest balance sample, micro-dollars; null: never sampled. */
  balanceMicros: number | null;
  /** When it was taken (unix ms); null with no sample. */
  sampledAt: number | null;
  /** The ledger's net (charges less refunds) over the last hour, micro-dollars. */
  spentLastHourMicros: number;
}

export interface Forecast {
  provider: string;
  balanceMicros: number | null;
  sampledAt: number | null;
  /** Micro-dollars per hour (the last hour's net spend; refunds can make it 0 or less). */
  spendPerHourMicros: number;
  /**
   * Hours the balance lasts at that rate: 0 when it is spent; null when it is not known (no
   * sample) or not bounded (nothing spent in the last hour).
   */
  hoursLeft: number | null;
}

/**
 * The forecast of one account: `balance / rate` at the last hour's net spend. A balance at or
 * below zero has 0 hours left whatever the rate; no spend means no bound (null).
 */
export function forecastBalance(f: AccountFigures): Forecast {
  const rate = f.spentLastHourMicros;
  const base = {
    provider: f.provider,
    balanceMicros: f.balanceMicros,
    sampledAt: f.sampledAt,
    spendPerHourMicros: rate,
  };
  if (f.balanceMicros === null) return { ...base, hoursLeft: null };
  if (f.balanceMicros <= 0) return { ...base, hoursLeft: 0 };
  return { ...base, hoursLeft: rate > 0 ? f.balanceMicros / rate : null };
}

export interface BalanceVerdict {
  level: "ok" | "warn" | "fail";
  summary: string;
  hint?: string;
}

/** Limits of the verdict: warn under `warnHours` (BALANCE_HOURS_WARN), fail under an hour or at 0. */
export interface BalanceLimits {
  warnHours: number;
  /** A newest sample older than this: the solvers stopped sampling (warn). */
  staleMs: number;
}

const hours = (h: number) => (h >= 100 ? `${Math.round(h)} h` : `${h.toFixed(1)} h`);

/** One account's line: balance, rate, hours left, and how old the sample is. */
export function describeForecast(f: Forecast, now: number): string {
  if (f.balanceMicros === null) return `${f.provider}: no balance sample`;
  const age = f.sampledAt === null ? "" : `, sampled ${Math.round((now - f.sampledAt) / 1000)} s ago`;
  const left = f.hoursLeft === null ? "no spend in the last hour" : `${hours(f.hoursLeft)} left`;
  return `${f.provider}: balance $${formatMicros(f.balanceMicros)}, spend $${formatMicros(f.spendPerHourMicros)}/h, ${left}${age}`;
}

/**
 * The verdict over every account: fail when one is spent or has under an hour left; warn under
 * `warnHours`, with a stale sample, or with spend but no sample at all; ok otherwise (also when
 * there is neither a sample nor spend: nothing to forecast yet).
 */
export function balanceVerdict(fs: Forecast[], limits: BalanceLimits, now: number): BalanceVerdict {
  if (fs.length === 0) return { level: "ok", summary: "no balance sample and no spend yet" };
  const lines = fs.map((f) => describeForecast(f, now)).join("; ");
  const hint = "top up the provider account (or rotate to a funded key: recovery rotate-key)";
  if (fs.some((f) => f.hoursLeft !== null && f.hoursLeft < 1)) return { level: "fail", summary: lines, hint };
  if (fs.some((f) => f.hoursLeft !== null && f.hoursLeft < limits.warnHours))
    return { level: "warn", summary: `under ${limits.warnHours} h left: ${lines}`, hint };
  if (fs.some((f) => f.balanceMicros === null))
    return {
      level: "warn",
      summary: lines,
      hint: "the solvers sample the balance every BALANCE_POLL_MS: is it 0, or does getbalance fail (solver log)?",
    };
  if (fs.some((f) => f.sampledAt !== null && now - f.sampledAt > limits.staleMs))
    return {
      level: "warn",
      summary: `stale sample: ${lines}`,
      hint: "no solver sampled lately: are they running, does getbalance fail (solver log 'balance sample')?",
    };
  return { level: "ok", summary: lines };
}

/** The `balance` line of `assess`: the verdict over every account, or why the figures could not be read. */
export function balanceCheck(
  fs: Forecast[] | Error,
  limits: BalanceLimits,
  now: number,
): { name: "balance" } & BalanceVerdict {
  if (fs instanceof Error)
    return {
      name: "balance",
      level: "warn",
      summary: `balance figures unreadable: ${fs.message}`,
      hint: "a missing provider_balances table: recovery migrate",
    };
  return { name: "balance", ...balanceVerdict(fs, limits, now) };
}
