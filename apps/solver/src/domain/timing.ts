import type { TaskType } from "@pipeline/shared/schemas";

/** First poll after a submit, per type (docs/provider-protocol.md, "Timing and limits"). */
export const DEFAULT_FIRST_POLL_MS: Record<TaskType, number> = {
  image: 5000,
  recaptcha_v3: 12_000,
  recaptcha_v2: 15_000,
  geetest: 15_000,
  turnstile: 10_000,
};

export function firstPollDelay(type: TaskType, override: number | undefined): number {
  return override ?? DEFAULT_FIRST_POLL_MS[type];
}

/** When a solved answer stops being valid; image answers do not expire. */
export function tokenExpiry(type: TaskType, solvedAt: Date, ttlMs: number): Date | null {
  if (type === "image") return null;
  return new Date(solvedAt.getTime() + ttlMs);
}

/** Exponential backoff with full jitter: uniform in [base*2^n / 2, base*2^n], capped. */
export function backoff(attempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}
