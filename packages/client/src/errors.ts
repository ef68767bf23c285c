import type { Problem } from "./types.ts";

/** The gateway refused the request (4xx the caller must fix, or a 5xx/429 after every retry). */
export class ApiError extends Error {
  override name = "ApiError";
  /** How many tries the call made (more than 1: an earlier try may have taken effect, its reply lost). */
  tries = 1;
  constructor(
    readonly status: number,
    /** The problem+json body, when the reply was one. */
    readonly problem: Problem | undefined,
    /** The region's base URL that answered. */
    readonly url: string,
    readonly headers: Headers,
  ) {
    const fields = problem?.errors?.map((e) => `${e.field}: ${e.message}`).join("; ");
    super(
      `${status} ${problem?.title ?? "HTTP error"}${problem?.detail ? `: ${problem.detail}` : ""}${fields ? ` (${fields})` : ""}`,
    );
  }

  /** The fields at fault (`header.idempotency-key`, `params.sitekey`, `quota.submitsPerSecond`…). */
  get fields(): { field: string; message: string }[] {
    return this.problem?.errors ?? [];
  }
}

/** No region could be reached (connection refused, reset, timed out) within the retries. */
export class NetworkError extends Error {
  override name = "NetworkError";
  constructor(
    message: string,
    readonly kind: "connection" | "timeout",
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The statuses the client retries: limits and outages that pass by themselves. */
export const RETRYABLE_STATUSES: readonly number[] = [429, 502, 503, 504];
/** Of those, the ones that say "this region, not now": try another region. */
export const FAILOVER_STATUSES: readonly number[] = [502, 503, 504];
