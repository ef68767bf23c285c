import { FINAL_STATUSES } from "@pipeline/shared/schemas";
import { z } from "zod";

const Accepted = z.object({ id: z.string().min(1) });
const View = z.object({ id: z.string(), status: z.string(), error: z.object({ code: z.string() }).nullish() });
const TERMINAL = new Set<string>(FINAL_STATUSES);

export interface DrillLoadOptions {
  gatewayUrl: string;
  apiKey: string;
  /** Submissions per second. */
  rate: number;
  /** Makes each task distinct (pageurl and idempotency key). */
  runId: string;
  /** Submissions outstanding at once, at most. */
  maxOutstanding?: number;
}

export interface Tracked {
  id: string;
  acceptedAt: number;
  /** Last status the gateway answered; "missing" after a 404. */
  status: string;
  /** The error code the gateway answered with the last status (e.g. TOKEN_UNAVAILABLE). */
  code?: string;
  finishedAt?: number;
}

type Headers = Record<string, string>;

/** Long-polls the task until it is finished (or `active()` turns false); errors are asked again. */
async function followTask(base: string, headers: Headers, t: Tracked, active: () => boolean): Promise<void> {
  while (active() && !TERMINAL.has(t.status)) {
    try {
      const res = await fetch(`${base}/v1/tasks/${t.id}?wait=10`, { headers, signal: AbortSignal.timeout(15_000) });
      if (res.status === 404) t.status = "missing";
      else if (res.ok) {
        const v = View.safeParse(await res.json());
        if (v.success) {
          t.status = v.data.status;
          if (v.data.error?.code) t.code = v.data.error.code;
        }
      } else await res.body?.cancel();
    } catch {
      /* the gateway is down or slow: ask again */
    }
    if (TERMINAL.has(t.status)) t.finishedAt = Date.now();
    else await Bun.sleep(t.status === "missing" ? 1000 : 200);
  }
}

/** Submits the `i`th task of the run; the tracked task when the gateway acknowledged it (202), else undefined. */
async function submitTask(base: string, headers: Headers, runId: string, i: number): Promise<Tracked | undefined> {
  try {
    const res = await fetch(`${base}/v1/tasks`, {
      method: "POST",
      headers: { ...headers, "idempotency-key": `drill-${runId}-${i}` },
      body: JSON.stringify({
        type: "turnstile",
        params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://drill.example/${runId}/${i}` },
      }),
      signal: AbortSignal.timeout(20_000),
    });
    const body = await res.json().catch(() => undefined);
    const a = Accepted.safeParse(body);
    if (res.status !== 202 || !a.success) return undefined;
    return { id: a.data.id, acceptedAt: Date.now(), status: "queued" };
  } catch {
    return undefined;
  }
}

/**
 * A steady open-loop load through the public API, as a client sees it: POST /v1/tasks at a fixed
 * rate, then a long-poll GET per acknowledged task until it is finished. Refusals (not 202) are
 * counted, not retried: they were never acknowledged. Errors while following a task (the
 * gateway or its database down) are retried.
 */
export function startDrillLoad(o: DrillLoadOptions) {
  const base = o.gatewayUrl.replace(/\/+$/, "");
  const headers = { authorization: `Bearer ${o.apiKey}`, "content-type": "application/json" };
  const tasks = new Map<string, Tracked>();
  const followers = new Set<Promise<void>>();
  let refused = 0;
  let sent = 0;
  let outstanding = 0;
  let submitting = true;
  let following = true;

  const track = (t: Tracked) => {
    tasks.set(t.id, t);
    const p = followTask(base, headers, t, () => following).finally(() => followers.delete(p));
    followers.add(p);
  };
  const submitOne = (i: number) =>
    submitTask(base, headers, o.runId, i).then((t) => {
      if (t) track(t);
      else refused++;
    });

  const loop = (async () => {
    const every = 1000 / o.rate;
    const t0 = Date.now();
    while (submitting) {
      if (outstanding < (o.maxOutstanding ?? 200)) {
        const i = sent++;
        outstanding++;
        void submitOne(i).finally(() => outstanding--);
      }
      const next = t0 + sent * every;
      await Bun.sleep(Math.max(1, next - Date.now()));
    }
  })();

  return {
    tasks,
    refused: () => refused,
    sent: () => sent,
    /** Completion times so far (for the rate). */
    completions: () =>
      [...tasks.values()]
        .filter((t) => t.status === "completed" && t.finishedAt !== undefined)
        .map((t) => t.finishedAt!),
    /** Stops submitting; then waits (up to `waitMs`) for every acknowledged task to finish. */
    async finish(waitMs: number): Promise<void> {
      submitting = false;
      await loop;
      while (outstanding > 0) await Bun.sleep(20);
      const until = Date.now() + waitMs;
      while (followers.size > 0 && Date.now() < until) await Bun.sleep(100);
      following = false;
      await Promise.race([Promise.all([...followers]), Bun.sleep(12_000)]);
    },
  };
}
export type DrillLoad = ReturnType<typeof startDrillLoad>;
