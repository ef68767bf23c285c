import { type ProviderReply, splitBulkAnswer } from "@pipeline/shared/provider";
import type { TaskType } from "@pipeline/shared/schemas";
import type { ProviderClient } from "./provider.ts";

/**
 * Types whose answers never hold a `|` (tokens of [A-Za-z0-9._-]), so they can share a bulk
 * `res.php?ids=` request. GeeTest answers hold one (`…|jordan`) and image answers are free text:
 * those are polled one by one.
 */
const BULK_SAFE: ReadonlySet<TaskType> = new Set<TaskType>(["recaptcha_v2", "recaptcha_v3", "turnstile"]);
/** Answers that carry more than the bulk reply says (turnstile's user agent, in JSON mode). */
const NEEDS_FULL_ANSWER: ReadonlySet<TaskType> = new Set<TaskType>(["turnstile"]);

export interface BulkPollerOptions {
  /** Ids per request (the protocol allows 100). */
  maxIds?: number;
  /**
   * The shortest time between two requests of a key (batches leave at most this often, unless
   * full): polls arriving meanwhile wait for the next one and share it. A poll of a key that has
   * sent nothing for this long leaves at once, with whatever arrived in the same turn.
   */
  lingerMs?: number;
  /**
   * A price the provider stated (get2) for a key and type is the price of that key's bulk-polled
   * answers of the type for this long: no second read per answer (default 10 min; 0: always read).
   */
  priceTtlMs?: number;
  now?: () => number;
}

/** The provider's last stated price per key and type (`res.php?action=get2`), and when. */
function priceMemory(ttlMs: number, now: () => number) {
  const prices = new Map<string, { price: unknown; at: number }>();
  const id = (key: string, type: TaskType) => `${type} ${key}`;
  return {
    learn(key: string, type: TaskType, r: ProviderReply) {
      if (r.kind === "ok" && r.extra?.price !== undefined)
        prices.set(id(key, type), { price: r.extra.price, at: now() });
    },
    /** The answer with the price stated lately, or undefined when none is fresh. */
    priced(key: string, type: TaskType, r: Extract<ProviderReply, { kind: "ok" }>): ProviderReply | undefined {
      const p = prices.get(id(key, type));
      if (!p || now() - p.at > ttlMs) return undefined;
      return { ...r, extra: { ...r.extra, price: p.price } };
    },
  };
}

interface Waiting {
  id: string;
  type: TaskType;
  resolve(r: ProviderReply): void;
}

export interface Poller {
  poll(providerId: string, key: string, type: TaskType, signal?: AbortSignal): Promise<ProviderReply>;
}

/**
 * Folds the polls of many tasks into one `res.php?action=get&ids=…` per key every few
 * milliseconds: a solver with thousands of provider tasks in flight makes a request per hundred
 * of them instead of one each. A task whose bulk part is its answer and whose type carries more
 * (turnstile) reads it once more on its own, as does one whose price the provider has not stated
 * lately for its key and type (when the client reads prices); a bulk answer that does not split
 * cleanly falls back to single polls. The wait for company is paid only under load: a poll of a
 * key that has been quiet for `lingerMs` leaves at once (a lone answer is not held 20 ms), while
 * a key polled continuously sends at most one request per `lingerMs` (or per full batch).
 */
export function createBulkPoller(provider: ProviderClient, o: BulkPollerOptions = {}): Poller {
  const maxIds = o.maxIds ?? 100;
  const lingerMs = o.lingerMs ?? 10;
  const queues = new Map<string, { waiting: Waiting[]; timer: ReturnType<typeof setTimeout> | undefined }>();
  const now = o.now ?? Date.now;
  const prices = priceMemory(o.priceTtlMs ?? 600_000, now);
  /** When each key's last request left: the next leaves `lingerMs` after it at the earliest. */
  const lastSent = new Map<string, number>();

  async function flush(key: string, batch: Waiting[]): Promise<void> {
    const single = (w: Waiting) =>
      provider.poll(w.id, key).then(
        (r) => {
          prices.learn(key, w.type, r);
          w.resolve(r);
        },
        (err: Error) => w.resolve({ kind: "transport", reason: err.message }),
      );
    if (batch.length === 1) return single(batch[0]!);
    let reply: ProviderReply;
    try {
      reply = await provider.pollMany(
        batch.map((w) => w.id),
        key,
      );
    } catch (err) {
      reply = { kind: "transport", reason: (err as Error).message };
    }
    if (reply.kind !== "ok") {
      // The whole request failed (transport, key error...): each task sees that reply.
      for (const w of batch)
        w.resolve(reply.kind === "not_ready" ? { kind: "transport", reason: "bulk get answered not ready" } : reply);
      return;
    }
    const parts = splitBulkAnswer(reply.value, batch.length);
    if (!parts) {
      await Promise.all(batch.map(single));
      return;
    }
    await Promise.all(
      batch.map((w, i) => {
        const part = parts[i]!;
        // A solved part is read once more on its own when it carries more than the bulk reply
        // says: turnstile's user agent, or the price (get2) when the client reads prices and the
        // provider stated none for this key and type lately.
        if (part.kind === "ok" && NEEDS_FULL_ANSWER.has(w.type)) return single(w);
        if (part.kind === "ok" && provider.readsPrice) {
          const priced = prices.priced(key, w.type, part);
          if (!priced) return single(w);
          w.resolve(priced);
          return undefined;
        }
        w.resolve(part);
        return undefined;
      }),
    );
  }

  function take(key: string): void {
    const q = queues.get(key);
    if (!q) return;
    clearTimeout(q.timer);
    q.timer = undefined;
    const batch = q.waiting.splice(0, maxIds);
    lastSent.set(key, now());
    if (q.waiting.length > 0) q.timer = setTimeout(() => take(key), 0);
    else queues.delete(key);
    void flush(key, batch);
  }

  return {
    poll(providerId, key, type, signal) {
      if (!BULK_SAFE.has(type)) return provider.poll(providerId, key, signal);
      return new Promise<ProviderReply>((resolve, reject) => {
        if (signal?.aborted) return reject(signal.reason);
        let q = queues.get(key);
        if (!q) queues.set(key, (q = { waiting: [], timer: undefined }));
        const onAbort = () => reject(signal!.reason);
        signal?.addEventListener("abort", onAbort, { once: true });
        q.waiting.push({
          id: providerId,
          type,
          resolve: (r) => (signal?.removeEventListener("abort", onAbort), resolve(r)),
        });
        if (q.waiting.length >= maxIds) take(key);
        else q.timer ??= setTimeout(() => take(key), Math.max(0, (lastSent.get(key) ?? -Infinity) + lingerMs - now()));
      });
    },
  };
}
