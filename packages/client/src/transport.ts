// One API call over several regions: each try with a timeout, retries with backoff and full
// jitter (or the server's Retry-After) on 429/502/503/504 and connection errors, failover to the
// next region (or those `x-try-regions` names) on a connection error or a 5xx, fail-back home
// after a probe, and the 409 `x-home-region` of a change sent to a task's non-home region
// followed once. A 4xx that is the caller's fault is never retried.
import { parseRetryAfter, type RetryPolicy, retryDelayMs } from "./backoff.ts";
import { ApiError, FAILOVER_STATUSES, NetworkError, RETRYABLE_STATUSES } from "./errors.ts";
import { createRegionState, hintedRegions, normalizeBaseUrl, tryOrder } from "./regions.ts";
import { type ClientStats, countError } from "./stats.ts";
import { parseProblem } from "./types.ts";

export interface TransportOptions {
  urls: string[];
  apiKey: string;
  fetch: typeof fetch;
  timeoutMs: number;
  retry: RetryPolicy;
  failBackMs: number;
  /** Region name -> base URL (to follow `x-try-regions` and `x-home-region`). */
  regionNames: Record<string, string>;
  stats: ClientStats;
  random?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  now?: () => number;
}

export interface CallSpec {
  method: "GET" | "POST" | "DELETE";
  path: string;
  body?: string;
  headers?: Record<string, string>;
  /** The region index to try first (a task's home); default the active region. */
  prefer?: number;
  /** This call's per-try timeout (a long-poll's is its wait plus the client's timeout). */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Return once the headers are in, the body unread (event streams); no timeout on the body. */
  stream?: boolean;
}

export interface Answer {
  status: number;
  headers: Headers;
  /** The body as text (empty for `stream` calls: read `response`). */
  text: string;
  response: Response;
  /** The index of the region that answered. */
  region: number;
}

type Try = { answer: Answer } | { error: NetworkError; refused: boolean };

/**
 * How long a write waits before it is tried again after a failure that may have taken effect (a
 * reset or timed-out connection, a 502/504 from a proxy). It is tried again at the same region
 * first (its Idempotency-Key answers there for sure), then at another: the first region's
 * accepted task replicates to the others within tens of milliseconds when they are connected, and
 * the other region then answers the same key with the same task instead of a second one
 * (docs/regions.md).
 */
export const FAILOVER_SETTLE_MS = 500;

export interface Transport {
  call(spec: CallSpec): Promise<Answer>;
  /** The index of the region a URL is configured at, or of a region name; -1 when unknown. */
  regionIndex(nameOrUrl: string): number;
  active(): number;
  urls: readonly string[];
}

const defaultSleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => (clearTimeout(t), reject(signal.reason)), { once: true });
  });

/** One try at one region: its answer (body read unless streaming), or the network error, counted. */
async function tryOnce(
  o: Pick<TransportOptions, "fetch" | "timeoutMs" | "apiKey" | "stats">,
  url: string,
  region: number,
  spec: CallSpec,
): Promise<Try> {
  const stats = o.stats;
  stats.requests++;
  const ctl = new AbortController();
  const timer = setTimeout(
    () => ctl.abort(new DOMException("timed out", "TimeoutError")),
    spec.timeoutMs ?? o.timeoutMs,
  );
  const signal = spec.signal ? AbortSignal.any([ctl.signal, spec.signal]) : ctl.signal;
  try {
    const response = await o.fetch(`${url}${spec.path}`, {
      method: spec.method,
      headers: {
        authorization: `Bearer ${o.apiKey}`,
        accept: spec.stream ? "text/event-stream" : "application/json",
        ...(spec.body !== undefined ? { "content-type": "application/json" } : {}),
        ...spec.headers,
      },
      ...(spec.body !== undefined ? { body: spec.body } : {}),
      signal,
    });
    const text = spec.stream && response.ok ? "" : await response.text();
    return { answer: { status: response.status, headers: response.headers, text, response, region } };
  } catch (err) {
    if (spec.signal?.aborted) throw spec.signal.reason;
    const kind = ctl.signal.aborted ? "timeout" : "connection";
    const code = (err as { code?: unknown }).code ?? (err as { cause?: { code?: unknown } }).cause?.code;
    countError(stats, kind);
    const what = kind === "timeout" ? "timed out" : `failed: ${(err as Error).message}`;
    const error = new NetworkError(`${spec.method} ${url}${spec.path} ${what}`, kind, { cause: err });
    return { error, refused: code === "ECONNREFUSED" };
  } finally {
    clearTimeout(timer);
  }
}

export function createTransport(o: TransportOptions): Transport {
  const urls = o.urls.map(normalizeBaseUrl);
  const names = Object.fromEntries(Object.entries(o.regionNames).map(([k, v]) => [k, normalizeBaseUrl(v)]));
  const now = o.now ?? Date.now;
  const sleep = o.sleep ?? defaultSleep;
  const state = createRegionState(o.failBackMs, now);
  const stats = o.stats;
  let probing: Promise<void> | undefined;

  async function probeHome(): Promise<void> {
    let ok = false;
    try {
      const res = await o.fetch(`${urls[0]}/readyz/accepting`, {
        signal: AbortSignal.timeout(Math.min(o.timeoutMs, 2000)),
      });
      ok = res.status === 200;
      await res.body?.cancel();
    } catch {}
    state.probed(ok);
    if (ok) stats.failbacks++;
  }

  function refusal(a: Answer, tries: number): ApiError {
    let body: unknown;
    try {
      body = JSON.parse(a.text);
    } catch {}
    const err = new ApiError(a.status, parseProblem(body), urls[a.region]!, a.headers);
    err.tries = tries;
    return err;
  }

  /** Where the next try goes after this one failed, and how long to wait first. */
  function next(
    region: number,
    t: Try,
    write: boolean,
    retriesSoFar: number,
    tried: Set<number>,
    askedAgain: Set<number>,
  ): { region: number; waitMs: number } {
    const answer = "answer" in t ? t.answer : undefined;
    const mayHaveTakenEffect = "answer" in t ? [502, 504].includes(t.answer.status) : !t.refused;
    // A write that may have been stored is asked again where it went, once, before another region:
    // there its Idempotency-Key answers for sure (the task, or nothing stored), while a region cut
    // off from it does not know the key yet and would make a second task, paid twice.
    if (write && mayHaveTakenEffect && !askedAgain.has(region)) {
      askedAgain.add(region);
      return { region, waitMs: FAILOVER_SETTLE_MS };
    }
    const failover = !answer || FAILOVER_STATUSES.includes(answer.status);
    let to = region;
    if (failover && urls.length > 1) {
      // A fenced region names the others; a read of a task whose home holds its result names that home.
      const named = answer?.headers.get("x-try-regions") ?? answer?.headers.get("x-home-region");
      const hinted = hintedRegions(named, names, urls);
      const order = tryOrder(urls.length, region, hinted).slice(1);
      to = order.find((i) => !tried.has(i)) ?? order[0]!;
      if (state.failedOver(region, to)) stats.failovers++;
    }
    // A region not tried yet in this call is tried at once; the same one again after a wait.
    // (A write that may have taken effect first lets it replicate there.)
    if (to !== region && !tried.has(to))
      return { region: to, waitMs: write && mayHaveTakenEffect ? FAILOVER_SETTLE_MS : 0 };
    const after = parseRetryAfter(answer?.headers.get("retry-after"), now());
    return { region: to, waitMs: retryDelayMs(retriesSoFar, o.retry, after, o.random) };
  }

  async function call(spec: CallSpec): Promise<Answer> {
    if (state.probeDue()) await (probing ??= probeHome().finally(() => (probing = undefined)));
    let region = spec.prefer ?? state.active();
    const tried = new Set<number>();
    const askedAgain = new Set<number>();
    let redirected = false;
    let backoffs = 0;
    for (let attempt = 1; ; attempt++) {
      tried.add(region);
      const t = await tryOnce(o, urls[region]!, region, spec);
      if ("answer" in t) {
        const a = t.answer;
        if (a.status >= 200 && a.status < 300) return a;
        const home = a.status === 409 ? regionIndex(a.headers.get("x-home-region") ?? "") : -1;
        if (home >= 0 && home !== region && !redirected) {
          redirected = true;
          stats.redirects++;
          region = home;
          continue;
        }
        countError(stats, String(a.status));
        if (!RETRYABLE_STATUSES.includes(a.status) || attempt >= o.retry.attempts) throw refusal(a, attempt);
      } else if (attempt >= o.retry.attempts) throw t.error;
      const step = next(region, t, spec.method !== "GET", backoffs, tried, askedAgain);
      if (step.waitMs > 0 || step.region === region) backoffs++;
      if (step.waitMs > 0) await sleep(step.waitMs, spec.signal);
      stats.retries++;
      region = step.region;
    }
  }

  function regionIndex(nameOrUrl: string): number {
    const url = names[nameOrUrl] ?? normalizeBaseUrl(nameOrUrl);
    return urls.indexOf(url);
  }

  return { call, regionIndex, active: () => state.active(), urls };
}
