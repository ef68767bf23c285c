// The typed client of the pipeline's REST API (`/v1`): see README.md for what it retries and why.
import { DEFAULT_RETRY, type RetryPolicy } from "./backoff.ts";
import { ApiError } from "./errors.ts";
import { checkOptions } from "./options.ts";
import { homeRegionOfId } from "./regions.ts";
import { type ClientStats, copyStats, countError, emptyStats } from "./stats.ts";
import { type Answer, type CallSpec, createTransport } from "./transport.ts";
import {
  parseAccepted,
  parseReportAccepted,
  parseTaskView,
  ReplyShapeError,
  type ReportAccepted,
  type TaskAccepted,
  type TaskRequest,
  type TaskView,
} from "./types.ts";
import { createWaits } from "./waits.ts";

export interface ClientOptions {
  /** The regions' base URLs (`https://fsn1.api.example`); the first is home. */
  regions: string[];
  apiKey: string;
  fetch?: typeof fetch;
  /** Each try's timeout (a long-poll adds its wait to it); default 10 s. */
  timeoutMs?: number;
  retry?: Partial<RetryPolicy>;
  /** After a failover, probe home (`/readyz/accepting`) this often and go back once it accepts; default 30 s. */
  failBackMs?: number;
  /** Region name (as the gateway says it: `x-try-regions`, `x-home-region`) -> base URL of `regions`. */
  regionNames?: Record<string, string>;
  /** The shared region order (the gateways' REGIONS): reads an id's home region from its last byte. */
  regionOrder?: string[];
  /** The gateway's MAX_WAIT_SECONDS (a long-poll asks at most this); default 60. */
  maxWaitSec?: number;
  /** For tests: the jitter's random source and the clock. */
  random?: () => number;
  now?: () => number;
}

export interface Client {
  /** Submits a task; the Idempotency-Key (a UUID unless given) is the same on every retry and region. */
  submit(
    task: TaskRequest,
    o?: { idempotencyKey?: string; signal?: AbortSignal },
  ): Promise<TaskAccepted & { idempotencyKey: string }>;
  get(id: string, o?: { signal?: AbortSignal }): Promise<TaskView>;
  /** Long-polls (`?wait=N`) until the task is final or `timeoutMs` passed; the last view either way (check `status`). */
  wait(id: string, o?: { timeoutMs?: number; signal?: AbortSignal }): Promise<TaskView>;
  /** The task's states from its event stream, reconnecting (Last-Event-ID) until a final one. */
  events(id: string, o?: { signal?: AbortSignal }): AsyncGenerator<TaskView>;
  /** `wait` over the event stream; the last view seen when `timeoutMs` passes first. */
  waitSSE(id: string, o?: { timeoutMs?: number; signal?: AbortSignal }): Promise<TaskView>;
  cancel(id: string, o?: { signal?: AbortSignal }): Promise<TaskView>;
  /** The site's verdict on a solved task's answer (a bad one is refunded by the provider). */
  report(id: string, verdict: "good" | "bad", o?: { signal?: AbortSignal }): Promise<ReportAccepted>;
  /** Requeues a failed (dead-lettered) task. */
  retry(id: string, o?: { signal?: AbortSignal }): Promise<TaskAccepted>;
  /** This key's callback signing secret (`whsec_…`), for verifyCallback. */
  webhookSecret(o?: { signal?: AbortSignal }): Promise<string>;
  stats(): ClientStats;
}

const HOMES_KEPT = 10_000;

export function createClient(o: ClientOptions): Client {
  checkOptions(o);
  const stats = emptyStats();
  const t = createTransport({
    urls: o.regions,
    apiKey: o.apiKey,
    fetch: o.fetch ?? fetch,
    timeoutMs: o.timeoutMs ?? 10_000,
    retry: { ...DEFAULT_RETRY, ...o.retry },
    failBackMs: o.failBackMs ?? 30_000,
    regionNames: o.regionNames ?? {},
    stats,
    ...(o.random ? { random: o.random } : {}),
    ...(o.now ? { now: o.now } : {}),
  });
  const timeoutMs = o.timeoutMs ?? 10_000;
  // The region that accepted each task: its reads and changes go there first.
  const homes = new Map<string, number>();
  const remember = (id: string, region: number) => {
    homes.delete(id);
    homes.set(id, region);
    if (homes.size > HOMES_KEPT) homes.delete(homes.keys().next().value!);
  };
  const homeOf = (id: string): number | undefined => {
    const known = homes.get(id);
    if (known !== undefined) return known;
    const name = o.regionOrder ? homeRegionOfId(id, o.regionOrder) : undefined;
    const i = name === undefined ? -1 : t.regionIndex(name);
    return i >= 0 ? i : undefined;
  };
  const taskPath = (id: string) => `/v1/tasks/${encodeURIComponent(id)}`;

  /** A JSON reply parsed by `parse`; a reply not as promised counts as a `shape` error. */
  async function json<T>(spec: CallSpec, parse: (raw: unknown, a: Answer) => T): Promise<T> {
    const a = await t.call(spec);
    try {
      return parse(JSON.parse(a.text), a);
    } catch (err) {
      countError(stats, "shape");
      if (err instanceof ReplyShapeError) throw err;
      throw new ReplyShapeError("(body)", "not JSON");
    }
  }

  const view = (id: string, query: string, spec: Partial<CallSpec> = {}) =>
    json({ method: "GET", path: `${taskPath(id)}${query}`, ...spec, prefer: homeOf(id) }, (raw) => parseTaskView(raw));

  const waits = createWaits({
    call: (spec) => t.call(spec),
    view,
    homeOf,
    stats,
    maxWaitSec: o.maxWaitSec ?? 60,
    timeoutMs,
    attempts: { ...DEFAULT_RETRY, ...o.retry }.attempts,
  });

  return {
    async submit(task, s = {}) {
      const idempotencyKey = s.idempotencyKey ?? crypto.randomUUID();
      const spec: CallSpec = {
        method: "POST",
        path: "/v1/tasks",
        body: JSON.stringify(task),
        headers: { "idempotency-key": idempotencyKey },
        ...(s.signal ? { signal: s.signal } : {}),
      };
      return json(spec, (raw, a) => {
        const r = parseAccepted(raw, a.headers.get("idempotent-replayed") === "true");
        remember(r.id, a.region);
        return { ...r, idempotencyKey };
      });
    },
    get: (id, g = {}) => view(id, "", g.signal ? { signal: g.signal } : {}),
    wait: waits.wait,
    events: waits.events,
    waitSSE: waits.waitSSE,
    cancel: (id, c = {}) =>
      json(
        { method: "DELETE", path: taskPath(id), prefer: homeOf(id), ...(c.signal ? { signal: c.signal } : {}) },
        (raw) => parseTaskView(raw),
      ),
    async report(id, verdict, r = {}) {
      const accepted = verdict === "good";
      const spec: CallSpec = {
        method: "POST",
        path: `${taskPath(id)}/report`,
        body: JSON.stringify({ accepted }),
        prefer: homeOf(id),
        ...(r.signal ? { signal: r.signal } : {}),
      };
      try {
        return await json(spec, parseReportAccepted);
      } catch (err) {
        // A retry's 409 after a try whose reply was lost: that try recorded the report.
        if (err instanceof ApiError && err.tries > 1 && err.problem?.title === "Already Reported")
          return { id, accepted, status: "pending" };
        throw err;
      }
    },
    retry: (id, r = {}) =>
      json(
        {
          method: "POST",
          path: `${taskPath(id)}/retry`,
          prefer: homeOf(id),
          ...(r.signal ? { signal: r.signal } : {}),
        },
        (raw) => parseAccepted(raw, false),
      ),
    webhookSecret: (w = {}) =>
      json({ method: "GET", path: "/v1/webhook-secret", ...(w.signal ? { signal: w.signal } : {}) }, (raw) => {
        const secret = (raw as { secret?: unknown } | null)?.secret;
        if (typeof secret !== "string") throw new ReplyShapeError("secret", "not a string");
        return secret;
      }),
    stats: () => copyStats(stats),
  };
}
