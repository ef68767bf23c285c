// Waiting for a task's final state: by long-poll (`?wait=N`) or by its event stream (SSE).

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
}

const isFinal = (v: TaskView) => FINAL_STATUSES.includes(v.status);
const taskPath = (id: string) => `/v1/tasks/${encodeURIComponent(id)}`;

export function createWaits(d: WaitDeps) {
  const { view, stats, maxWaitSec, timeoutMs, homeOf } = d;
  const t = { call: d.call };
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

  async function* events(id: string, e: { signal?: AbortSignal } = {}): AsyncGenerator<TaskView> {
    let lastId: string | undefined;
    for (;;) {
      const a = await t.call({
        method: "GET",
        path: `${taskPath(id)}/events`,
        stream: true,
        prefer: homeOf(id),
        ...(lastId ? { headers: { "last-event-id": lastId } } : {}),
        ...(e.signal ? { signal: e.signal } : {}),
      });
      if (!a.response.body) throw new ReplyShapeError("(body)", "the event stream has no body");
      let final = false;
      for await (const ev of readSse(a.response.body)) {
        if (ev.event !== "state") continue;
        lastId = ev.id ?? lastId;
        let v: TaskView;
        try {
          v = parseTaskView(JSON.parse(ev.data), "data.");
        } catch (err) {
          countError(stats, "shape");
          throw err instanceof ReplyShapeError ? err : new ReplyShapeError("data", "not JSON");
        }
        yield v;
        if (isFinal(v)) final = true;
      }
      // The stream ends at SSE_MAX_SECONDS (or the connection dropped): open a fresh one.
      if (final) return;
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
