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
  /** How long a poll waits for company before its request leaves. */
  lingerMs?: number;
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
 * (turnstile, or every type when the client reads prices) reads it once more on its own; a bulk answer that does not split cleanly falls
 * back to single polls.
 */
export function createBulkPoller(provider: ProviderClient, o: BulkPollerOptions = {}): Poller {
  const maxIds = o.maxIds ?? 100;
  const lingerMs = o.lingerMs ?? 20;
  const queues = new Map<string, { waiting: Waiting[]; timer: ReturnType<typeof setTimeout> | undefined }>();

  async function flush(key: string, batch: Waiting[]): Promise<void> {
    const single = (w: Waiting) =>
      provider.poll(w.id, key).then(w.resolve, (err: Error) => w.resolve({ kind: "transport", reason: err.message }));
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
        // says: turnstile's user agent, or the price (get2) when the client reads prices.
        if (part.kind === "ok" && (provider.readsPrice || NEEDS_FULL_ANSWER.has(w.type))) return single(w);
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
        else q.timer ??= setTimeout(() => take(key), lingerMs);
      });
    },
  };
}
