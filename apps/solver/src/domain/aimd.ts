// Adaptive concurrency per provider account: how many provider tasks this solver keeps at the
// account at once, found by additive increase and multiplicative decrease (AIMD, as TCP finds a
// link's capacity). Pure: the clock is given; the worker's window (worker/provider-window.ts)
// counts the tasks held and feeds the provider's replies in.
//
// The limit lives between `floor` (1) and the account's plan (never above it), and starts at the
// plan (the fixed behaviour until the provider first says it is busy):
//   increase  +1 once `limit` submissions succeeded while the limit was in use (all its places
//             held): one step per round trip of the whole window, so a solver with little to do
//             does not grow a limit it never tests;
//   decrease  x`factor` (rounded down, at least `floor`) on a congestion signal
//             (ERROR_NO_SLOT_AVAILABLE, HTTP 429, a submit timeout...), at most once per `holdMs`:
//             the burst of rejections one full window draws is one signal, not a collapse to 1.
// Against an account whose real capacity is C tasks, the limit climbs to C + 1 (the submit past
// C is refused), drops to floor(factor * (C + 1)), and climbs again: it oscillates in the band
// [floor(factor * (C + 1)), C + 1], i.e. about 0.7 C to C with the default factor.
import { classifyError, type ProviderProfile, type ProviderReply } from "@pipeline/shared/provider";

export interface AimdOptions {
  /** The lowest limit (default 1): a busy provider still gets one task at a time, the probe that finds it free again. */
  floor?: number;
  /** The multiplicative decrease (0 < factor < 1; default 0.7). */
  factor?: number;
  /** At most one decrease per this many ms (default 1000): longer than a submit round trip, so one window's rejections are one signal. */
  holdMs?: number;
}

/** What a provider's reply to a submit says about the account's capacity. */
export type CapacitySignal = "accepted" | "congested" | "none";

/**
 * A submit's reply read for capacity: a provider task made is `accepted`; the account is busy
 * (`congested`) on ERROR_NO_SLOT_AVAILABLE, ERROR_TOO_MUCH_REQUESTS (2Captcha's rate limit),
 * an HTTP 429, a submit that timed out, and CaptchaAI's ERROR_ZERO_BALANCE (there: "no free
 * threads"); anything else (a bad task, a wrong key, a 5xx page) says nothing about capacity:
 * the breaker's business.
 */
export function capacitySignal(reply: ProviderReply, profile: ProviderProfile): CapacitySignal {
  if (reply.kind === "ok") return "accepted";
  if (reply.kind === "transport")
    return reply.reason === "timeout" || reply.reason === "HTTP 429" ? "congested" : "none";
  if (reply.kind !== "error") return "none";
  if (reply.code === "ERROR_NO_SLOT_AVAILABLE" || reply.code === "ERROR_TOO_MUCH_REQUESTS") return "congested";
  if (reply.code === "ERROR_ZERO_BALANCE" && classifyError(reply.code, profile) === "retry") return "congested";
  return "none";
}

/** One account's adaptive limit. */
export class AimdLimit {
  private current: number | undefined;
  /** Successful submits while the limit was in use, since the last step. */
  private credit = 0;
  private lastDecreaseAt = Number.NEGATIVE_INFINITY;
  private readonly floor: number;
  private readonly factor: number;
  private readonly holdMs: number;

  constructor(
    o: AimdOptions,
    private readonly now: () => number,
  ) {
    this.floor = Math.max(1, Math.floor(o.floor ?? 1));
    this.factor = o.factor ?? 0.7;
    this.holdMs = o.holdMs ?? 1000;
    if (!(this.factor > 0 && this.factor < 1)) throw new RangeError("factor: expected 0 < factor < 1");
  }

  /** The limit under the plan now (the plan may change: the limit never exceeds it, never goes under the floor). */
  limit(plan: number): number {
    const cap = Math.max(this.floor, Math.floor(plan));
    return Math.min(cap, Math.max(this.floor, this.current ?? cap));
  }

  /**
   * A submit made a provider task while `inUse` places were held (this task's included). Counts
   * toward the next step only when the limit was in use; returns true when the limit grew.
   */
  accepted(plan: number, inUse: number): boolean {
    const l = this.limit(plan);
    this.current = l;
    if (inUse < l) return false;
    if (++this.credit < l) return false;
    this.credit = 0;
    if (l >= Math.max(this.floor, Math.floor(plan))) return false;
    this.current = l + 1;
    return true;
  }

  /** The provider said it is busy: the limit cut by the factor, unless it was cut less than `holdMs` ago. Returns true when it was cut. */
  congested(plan: number): boolean {
    const t = this.now();
    const l = this.limit(plan);
    if (t - this.lastDecreaseAt < this.holdMs) return false;
    this.lastDecreaseAt = t;
    this.credit = 0;
    this.current = Math.max(this.floor, Math.floor(l * this.factor));
    return this.current < l;
  }
}
