/** Circuit breaker state for one provider key. */
export type BreakerState = "closed" | "open" | "half_open";

export interface BreakerOptions {
  /** Failure ratio in the window that opens the breaker (0..1). */
  failureRate: number;
  /** Calls needed in the window before the ratio counts. */
  minCalls: number;
  windowMs: number;
  /** How long it stays open before a probe; doubles on each failed probe up to maxCooldownMs. */
  cooldownMs: number;
  maxCooldownMs: number;
}

export interface Breaker {
  state(): BreakerState;
  /** Why it opened last (an error code or "error rate"). */
  reason(): string | undefined;
  /** True when a task may call the provider now. */
  allows(): boolean;
  /** Milliseconds until the next probe (0 when closed). */
  retryInMs(): number;
  success(): void;
  failure(): void;
  /** A key-level error (wrong key, banned IP...): opens at once. */
  keyStopped(code: string): void;
  /** Result of a half-open probe. */
  probed(ok: boolean): void;
}

/**
 * A pure breaker over an injected clock: closed -> open on a key-level error or when the
 * failure ratio over the window reaches the threshold; open -> half_open after the cooldown;
 * half_open -> closed on a good probe, back to open (longer cooldown) on a bad one.
 */
export function createBreaker(
  o: BreakerOptions,
  now: () => number = Date.now,
  onChange: (s: BreakerState, reason?: string) => void = () => {},
): Breaker {
  let state: BreakerState = "closed";
  let openedUntil = 0;
  let cooldown = o.cooldownMs;
  let why: string | undefined;
  // The window as a queue (times and outcomes) with a moving head and running counts: each call
  // costs O(1) amortized, also at thousands of provider replies per second.
  let at: number[] = [];
  let ok: boolean[] = [];
  let head = 0;
  let failures = 0;
  const clear = () => {
    at = [];
    ok = [];
    head = 0;
    failures = 0;
  };
  const set = (s: BreakerState, reason?: string) => {
    if (s === state) return;
    state = s;
    onChange(s, reason);
  };
  const open = (reason: string) => {
    why = reason;
    openedUntil = now() + cooldown;
    clear();
    set("open", reason);
  };
  const tick = () => {
    if (state === "open" && now() >= openedUntil) set("half_open");
  };
  const record = (good: boolean) => {
    if (state !== "closed") return;
    const t = now();
    at.push(t);
    ok.push(good);
    if (!good) failures++;
    while (head < at.length && at[head]! <= t - o.windowMs) if (!ok[head++]) failures--;
    if (head > 1024 && head * 2 > at.length) {
      at = at.slice(head);
      ok = ok.slice(head);
      head = 0;
    }
    const n = at.length - head;
    if (n >= o.minCalls && failures / n >= o.failureRate) open("error rate");
  };
  return {
    state: () => (tick(), state),
    reason: () => why,
    allows: () => (tick(), state === "closed"),
    retryInMs: () => (tick(), state === "closed" ? 0 : Math.max(0, openedUntil - now())),
    success: () => record(true),
    failure: () => record(false),
    keyStopped: (code) => open(code),
    probed(ok) {
      tick();
      if (state !== "half_open") return;
      if (ok) {
        cooldown = o.cooldownMs;
        why = undefined;
        set("closed");
      } else {
        cooldown = Math.min(o.maxCooldownMs, cooldown * 2);
        open(why ?? "probe failed");
      }
    },
  };
}
