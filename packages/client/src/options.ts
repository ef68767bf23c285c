import type { RetryPolicy } from "./backoff.ts";

/** A client option the caller got wrong; `field` names it (`regions[1]`, `retry.attempts`…). */
export class ClientOptionError extends Error {
  override name = "ClientOptionError";
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`createClient: ${field} ${message}`);
  }
}

const positive = (v: number | undefined, field: string, min = 0) => {
  if (v !== undefined && !(Number.isFinite(v) && v >= min))
    throw new ClientOptionError(field, `must be a number of at least ${min}`);
};

/** Checks what createClient is given, naming the first option at fault. */
export function checkOptions(o: {
  regions: unknown;
  apiKey: unknown;
  timeoutMs?: number;
  failBackMs?: number;
  maxWaitSec?: number;
  retry?: Partial<RetryPolicy>;
  regionNames?: Record<string, string>;
}): void {
  if (!Array.isArray(o.regions) || o.regions.length === 0)
    throw new ClientOptionError("regions", "must list at least one base URL");
  o.regions.forEach((u, i) => {
    if (typeof u !== "string" || !/^https?:\/\/[^/]/i.test(u) || !URL.canParse(u))
      throw new ClientOptionError(`regions[${i}]`, "must be an http(s) base URL");
  });
  if (typeof o.apiKey !== "string" || o.apiKey.length === 0)
    throw new ClientOptionError("apiKey", "must be a non-empty string");
  positive(o.timeoutMs, "timeoutMs", 1);
  positive(o.failBackMs, "failBackMs");
  positive(o.maxWaitSec, "maxWaitSec", 1);
  positive(o.retry?.attempts, "retry.attempts", 1);
  if (o.retry?.attempts !== undefined && !Number.isInteger(o.retry.attempts))
    throw new ClientOptionError("retry.attempts", "must be an integer");
  positive(o.retry?.baseMs, "retry.baseMs", 1);
  positive(o.retry?.maxMs, "retry.maxMs", 1);
  for (const [name, url] of Object.entries(o.regionNames ?? {}))
    if (!(o.regions as string[]).some((u) => u.replace(/\/+$/, "") === url.replace(/\/+$/, "")))
      throw new ClientOptionError(`regionNames.${name}`, "must be one of regions");
}
