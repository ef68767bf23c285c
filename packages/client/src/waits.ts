// Waiting for a task's final state: by long-poll (`?wait=N`) or by its event stream (SSE).

import { NetworkError } from "./errors.ts";
import { readSse } from "./sse.ts";
import type { ClientStats } from "./stats.ts";
import { countError } from "./stats.ts";
import type { Answer, CallSpec } from "./transport.ts";
import { FINAL_STATUSES, parseTaskView, ReplyShapeError, type TaskView } from "./types.ts";

export interface WaitDeps {
  call(spec: CallSpec): Promise<Answer>;
  /** `GET /v1/tasks/:id<query>` parsed, sent to the task's home first. */
  view(id: string, query: string, spec?: Partial<CallSpec>): Promise<TaskView>;
  homeOf(id: string): number | undefined;
  stats: ClientStats;
  /** The gateway's MAX_WAIT_SECONDS. */
  maxWaitSec: number;
  /** The client's per-try timeout. */
  timeoutMs: number;
  /** The client's tries per call (consecutive silent event streams before giving up). */
  attempts: number;
}

const isFinal = (v: TaskView) => FINAL_STATUSES.includes(v.status);
const taskPath = (id: string) => `/v1/tasks/${encodeURIComponent(id)}`;

export function createWaits(d: WaitDeps) {
  const { view, stats, maxWaitSec, timeoutMs, homeOf } = d;
  async function wait(id: string, w: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<TaskView> {
    const until = Date.now() + (w.timeoutMs ?? 120_000);
    for (;;) {
      const left = until - Date.now();
      const sec = Math.max(0, Math.min(maxWaitSec, Math.ceil(left / 1000)));
      const v = await view(id, sec > 0 ? `?wait=${sec}` : "", {
        timeoutMs: sec * 1000 + timeoutMs,
        ...(w.signal ? { signal: w.signal } : {}),
      });
      if (isFinal(v) || Date.now() >= until) return v;
    }
  }

  /** One stream's views; `dropped` when its connection broke before the stream ended. */
  async function* stream(body: ReadableStream<Uint8Array>, seen: { lastId?: string; events: number }) {
    try {
      for await (const ev of readSse(body)) {
        if (ev.event !== "state") continue;
        seen.lastId = ev.id ?? seen.lastId;
        seen.events++;
        try {
          yield parseTaskView(JSON.parse(ev.data), "data.");
        } catch (err) {
          if (!(err instanceof SyntaxError || err instanceof ReplyShapeError)) throw err;
          countError(stats, "shape");
          throw err instanceof ReplyShapeError ? err : new ReplyShapeError("data", "not JSON");
        }
      }
    } catch (err) {
      if (err instanceof ReplyShapeError) throw err;
      countError(stats, "connection");
    }
  }

  async function* events(id: string, e: { signal?: AbortSignal } = {}): AsyncGenerator<TaskView> {
    const seen: { lastId?: string; events: number } = { events: 0 };
    for (let empty = 0; ; ) {
      const a = await d.call({
        method: "GET",
        path: `${taskPath(id)}/events`,
        stream: true,
        prefer: homeOf(id),
        ...(seen.lastId ? { headers: { "last-event-id": seen.lastId } } : {}),
        ...(e.signal ? { signal: e.signal } : {}),
      });
      if (!a.response.body) throw new ReplyShapeError("(body)", "the event stream has no body");
      const before = seen.events;
      for await (const v of stream(a.response.body, seen)) {
        yield v;
        if (isFinal(v)) return;
      }
      if (e.signal?.aborted) throw e.signal.reason;
      // The stream ended (SSE_MAX_SECONDS) or dropped: open a fresh one; after streams that said
      // nothing, back off, and give up after as many as a call's tries.
      empty = seen.events > before ? 0 : empty + 1;
      if (empty >= d.attempts)
        throw new NetworkError(`GET ${taskPath(id)}/events: ${empty} streams ended without an event`, "connection");
      if (empty > 0) await new Promise((r) => setTimeout(r, Math.min(5000, 200 * 2 ** empty)));
      stats.retries++;
    }
  }

  async function waitSSE(id: string, w: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<TaskView> {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), w.timeoutMs ?? 120_000);
    const signal = w.signal ? AbortSignal.any([ctl.signal, w.signal]) : ctl.signal;
    let last: TaskView | undefined;
    try {
      for await (const v of events(id, { signal })) {
        last = v;
        if (isFinal(v)) return v;
      }
    } catch (err) {
      if (!ctl.signal.aborted || w.signal?.aborted) throw err;
    } finally {
      clearTimeout(timer);
    }
    return last ?? (await view(id, ""));
  }

  return { wait, events, waitSSE };
}
