// The adaptive window (ADAPTIVE_CONCURRENCY=1): per provider account, at most its AIMD limit
// (domain/aimd.ts) of this solver's tasks hold a provider task there at once. A task takes a place
// before its unit of the plan (slots.ts) and keeps it while its provider task runs (the waiting
// room included, a resubmit too); the place is given back when the delivery ends. Over the limit a
// task waits here for a place (its message kept alive by the worker, high lane first), not claimed
// yet, so no attempt is spent and no lease held while it waits.
import type { ProviderProfile, ProviderReply } from "@pipeline/shared/provider";
import type { Priority } from "@pipeline/shared/schemas";
import { AimdLimit, type AimdOptions, capacitySignal } from "../domain/aimd.ts";

export interface ProviderWindow {
  /**
   * A place for the task at the account: at once when under the limit, else the first one freed
   * (high lane first) within `waitMs`; false after it (or on `signal`, or once the waits are ended).
   */
  enter(keyRef: string, taskId: string, priority: Priority, waitMs: number, signal?: AbortSignal): Promise<boolean>;
  /** The account's places are all held: another account may take the task. */
  atLimit(keyRef: string): boolean;
  /**
   * The task holds a place at this account from now on, without waiting: moved from another
   * account (a resubmit routed elsewhere), or taken over the limit by a task whose provider task
   * already runs (a redelivered one: it is finished, not made to wait, and counted).
   */
  hold(taskId: string, keyRef: string): void;
  /** The delivery ended: its place (if any) is free. */
  leave(taskId: string): void;
  /** A submit's reply at the account: the limit grows or is cut (domain/aimd.ts). */
  observe(keyRef: string, reply: ProviderReply): void;
  /** Each account's limit now, its plan and its places held (the gauge, the heartbeat). */
  limits(): Record<string, { limit: number; plan: number; held: number }>;
  /** Ends every wait (the solver stops): they answer false. */
  endWaits(): void;
}

export interface WindowOptions extends AimdOptions {
  /** The account's plan (its threads): the limit's ceiling. */
  planOf(keyRef: string): number;
  profile: ProviderProfile;
  now?: () => number;
  /** A limit changed (logged at info by the service). */
  onChange?(keyRef: string, from: number, to: number, why: "increase" | "decrease"): void;
}

interface Waiter {
  taskId: string;
  resolve(ok: boolean): void;
}

interface Account {
  aimd: AimdLimit;
  held: number;
  waiters: Record<Priority, Waiter[]>;
}

const LANES: Priority[] = ["high", "normal", "low"];

export function createProviderWindow(o: WindowOptions): ProviderWindow {
  const now = o.now ?? Date.now;
  const accounts = new Map<string, Account>();
  /** Which account each task holds a place at. */
  const places = new Map<string, string>();
  let ended = false;
  const account = (keyRef: string): Account => {
    let a = accounts.get(keyRef);
    if (!a)
      accounts.set(keyRef, (a = { aimd: new AimdLimit(o, now), held: 0, waiters: { high: [], normal: [], low: [] } }));
    return a;
  };
  const limitOf = (keyRef: string) => account(keyRef).aimd.limit(o.planOf(keyRef));
  const take = (keyRef: string, taskId: string) => {
    account(keyRef).held++;
    places.set(taskId, keyRef);
  };
  /** Hands free places to the waiting tasks, high lane first. */
  const serve = (keyRef: string) => {
    const a = account(keyRef);
    for (const lane of LANES) {
      while (a.held < limitOf(keyRef) && a.waiters[lane].length > 0) {
        const w = a.waiters[lane].shift()!;
        take(keyRef, w.taskId);
        w.resolve(true);
      }
    }
  };
  const release = (taskId: string) => {
    const keyRef = places.get(taskId);
    if (keyRef === undefined) return undefined;
    places.delete(taskId);
    account(keyRef).held--;
    return keyRef;
  };
  return {
    async enter(keyRef, taskId, priority, waitMs, signal) {
      const a = account(keyRef);
      if (places.has(taskId)) return true;
      const queued = a.waiters.high.length + a.waiters.normal.length + a.waiters.low.length;
      if (a.held < limitOf(keyRef) && queued === 0) {
        take(keyRef, taskId);
        return true;
      }
      if (waitMs <= 0 || ended || signal?.aborted) return false;
      const { promise, resolve } = Promise.withResolvers<boolean>();
      const w: Waiter = { taskId, resolve };
      a.waiters[priority].push(w);
      // A place free while others wait (the plan grew): served in lane order, this one included.
      serve(keyRef);
      const cancel = () => {
        const q = a.waiters[priority];
        const i = q.indexOf(w);
        if (i >= 0) q.splice(i, 1), resolve(false);
      };
      const timer = setTimeout(cancel, waitMs);
      signal?.addEventListener("abort", cancel, { once: true });
      try {
        return await promise;
      } finally {
        clearTimeout(timer);
        signal?.removeEventListener("abort", cancel);
      }
    },
    atLimit: (keyRef) => account(keyRef).held >= limitOf(keyRef),
    hold(taskId, keyRef) {
      const from = places.get(taskId);
      if (from === keyRef) return;
      release(taskId);
      take(keyRef, taskId);
      if (from !== undefined) serve(from);
    },
    leave(taskId) {
      const keyRef = release(taskId);
      if (keyRef !== undefined) serve(keyRef);
    },
    observe(keyRef, reply) {
      const signal = capacitySignal(reply, o.profile);
      if (signal === "none") return;
      const a = account(keyRef);
      const plan = o.planOf(keyRef);
      const from = a.aimd.limit(plan);
      const changed = signal === "accepted" ? a.aimd.accepted(plan, a.held) : a.aimd.congested(plan);
      if (!changed) return;
      o.onChange?.(keyRef, from, a.aimd.limit(plan), signal === "accepted" ? "increase" : "decrease");
      serve(keyRef);
    },
    limits() {
      const out: Record<string, { limit: number; plan: number; held: number }> = {};
      for (const [keyRef, a] of accounts)
        out[keyRef] = { limit: limitOf(keyRef), plan: o.planOf(keyRef), held: a.held };
      return out;
    },
    endWaits() {
      ended = true;
      for (const a of accounts.values())
        for (const lane of LANES) for (const w of a.waiters[lane].splice(0)) w.resolve(false);
    },
  };
}
