import { type ProviderReply, parseProviderReply } from "@pipeline/shared/provider";
import { createPermits } from "../domain/permits.ts";

export interface ProviderClient {
  /** `in.php`: submits a task; `ok.value` is the provider's task id. */
  submit(params: Record<string, string>, key: string, signal?: AbortSignal): Promise<ProviderReply>;
  /**
   * `res.php?action=get` (`get2` when the client reads prices: the answer and `extra.price`):
   * `ok.value` is the answer. Only the key that submitted may poll.
   */
  poll(providerId: string, key: string, signal?: AbortSignal): Promise<ProviderReply>;
  /** `res.php?action=get&ids=a,b,c`: one reply for several ids (`ok.value` is the `|`-joined answers). */
  pollMany(providerIds: string[], key: string, signal?: AbortSignal): Promise<ProviderReply>;
  /** `res.php?action=getbalance`: the breaker's half-open probe. */
  balance(key: string, signal?: AbortSignal): Promise<ProviderReply>;
  /** `res.php?action=reportbad|reportgood`: the client's verdict on an answer. */
  report(providerId: string, accepted: boolean, key: string, signal?: AbortSignal): Promise<ProviderReply>;
  /** Whether single polls read the price (`get2`). */
  readonly readsPrice: boolean;
}

export interface ProviderClientOptions {
  url: string;
  /** Several accounts (PROVIDERS): the URL of the account a key belongs to; `url` otherwise. */
  urlOfKey?: (key: string) => string;
  timeoutMs: number;
  /** Sees every reply (metrics). */
  onReply?: (call: "submit" | "poll" | "balance" | "report", reply: ProviderReply) => void;
  /** Poll with `get2`, whose reply carries the price the provider charged (the ledger's charge). */
  readPrice?: boolean;
  /**
   * HTTP requests in flight at once (the rest wait their turn, their timeout not yet running):
   * thousands of tasks starting together must not open thousands of sockets.
   */
  maxConcurrent?: number;
}

export function createProviderClient(o: ProviderClientOptions): ProviderClient {
  const baseOf = (key: string) => (o.urlOfKey?.(key) ?? o.url).replace(/\/+$/, "");
  const slots = createPermits(o.maxConcurrent ?? 64);
  async function call(
    path: string,
    fields: Record<string, string>,
    key: string,
    signal?: AbortSignal,
  ): Promise<ProviderReply> {
    await slots.acquire();
    try {
      if (signal?.aborted) throw signal.reason;
      return await send(path, fields, key, signal);
    } finally {
      slots.release();
    }
  }
  async function send(
    path: string,
    fields: Record<string, string>,
    key: string,
    signal?: AbortSignal,
  ): Promise<ProviderReply> {
    const body = new URLSearchParams({ ...fields, key, json: "1" });
    // One controller per call, its timer cleared and its listener removed when the call ends. Not
    // AbortSignal.timeout + AbortSignal.any: those keep each call's timer (PROVIDER_TIMEOUT_MS, 15 s)
    // and a composite signal alive after the reply, tens of thousands at a few thousand calls a
    // second, which the solver's garbage collections then walked (bench/HISTORY.md, 2026-12-07).
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(new DOMException("provider call timed out", "TimeoutError")), o.timeoutMs);
    const onAbort = () => ac.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      const res = await fetch(`${baseOf(key)}/${path}`, {
        method: "POST",
        body,
        headers: { "content-type": "application/x-www-form-urlencoded" },
        signal: ac.signal,
      });
      return parseProviderReply(res.status, await res.text());
    } catch (err) {
      if (signal?.aborted) throw err;
      return {
        kind: "transport",
        reason: (err as Error).name === "TimeoutError" ? "timeout" : `network: ${(err as Error).message}`,
      };
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    }
  }
  const getAction = o.readPrice ? "get2" : "get";
  const observed = (name: "submit" | "poll" | "balance" | "report", p: Promise<ProviderReply>) =>
    o.onReply ? p.then((r) => (o.onReply!(name, r), r)) : p;
  return {
    submit: (params, key, signal) => observed("submit", call("in.php", params, key, signal)),
    poll: (providerId, key, signal) =>
      observed("poll", call("res.php", { action: getAction, id: providerId }, key, signal)),
    pollMany: (providerIds, key, signal) =>
      observed("poll", call("res.php", { action: "get", ids: providerIds.join(",") }, key, signal)),
    balance: (key, signal) => observed("balance", call("res.php", { action: "getbalance" }, key, signal)),
    report: (providerId, accepted, key, signal) =>
      observed(
        "report",
        call("res.php", { action: accepted ? "reportgood" : "reportbad", id: providerId }, key, signal),
      ),
    readsPrice: o.readPrice === true,
  };
}
