// A drill's clients: tasks submitted through the load balancer at a steady rate, each followed to
// its final status, as an automation suite would. A submission is retried with the same
// idempotency key (1 s apart, 6 attempts) when it is not acknowledged; a status read that fails is
// read again. After the load stops, every acknowledged task is read once more: a token other than
// the first one seen is a double result (drill-line.ts).
import type { LbClient } from "./client.ts";
import { isFinal, type TaskRecord } from "./drill-line.ts";
import { sleep } from "./exec.ts";

interface View {
  id?: string;
  status?: string;
  result?: { token?: string };
}

async function call(
  c: LbClient,
  path: string,
  init: { method?: string; body?: unknown; key?: string; timeoutMs: number },
) {
  const res = await fetch(`${c.url}${path}`, {
    method: init.method ?? "GET",
    headers: {
      authorization: `Bearer ${c.apiKey}`,
      ...(init.body ? { "content-type": "application/json" } : {}),
      ...(init.key ? { "idempotency-key": init.key } : {}),
    },
    body: init.body ? JSON.stringify(init.body) : undefined,
    signal: AbortSignal.timeout(init.timeoutMs),
    tls: { ca: c.ca },
  } as RequestInit);
  return { status: res.status, body: (await res.json().catch(() => ({}))) as View };
}

async function submit(c: LbClient, r: TaskRecord, tag: string): Promise<void> {
  for (let attempt = 0; attempt < 6 && !r.id; attempt++) {
    if (attempt) await sleep(1000);
    try {
      const res = await call(c, "/v1/tasks", {
        method: "POST",
        key: r.key,
        timeoutMs: 10_000,
        body: {
          type: "turnstile",
          params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/rehearsal/${tag}/${r.key}` },
        },
      });
      if ((res.status === 202 || res.status === 200) && res.body.id) {
        r.id = res.body.id;
        r.acceptedAt = Date.now();
        return;
      }
    } catch {}
    r.refused++;
  }
}

/** Long-polls the task until it is final or `until` (epoch ms) passes; errors are read again. */
async function follow(c: LbClient, r: TaskRecord, until: () => number): Promise<void> {
  while (r.id && !isFinal(r.status) && Date.now() < until()) {
    try {
      // A short long-poll: an answer cut by a host's death costs at most 8 s of the RTO measured.
      const res = await call(c, `/v1/tasks/${r.id}?wait=5`, { timeoutMs: 8000 });
      if (res.status !== 200) throw new Error(String(res.status));
      r.status = res.body.status;
      if (isFinal(r.status)) {
        r.finalAt = Date.now();
        r.token = res.body.result?.token;
      }
    } catch {
      await sleep(1000);
    }
  }
}

export interface TrackedLoad {
  records: TaskRecord[];
  /** Stops submitting; waits until every acknowledged task is final or `timeoutMs` passed; reads each once more. */
  stop(timeoutMs?: number): Promise<TaskRecord[]>;
}

export function startTrackedLoad(c: LbClient, perSecond: number, tag: string): TrackedLoad {
  const records: TaskRecord[] = [];
  const running = new Set<Promise<void>>();
  let deadline = Number.POSITIVE_INFINITY;
  const timer = setInterval(() => {
    const r: TaskRecord = { key: `${tag}-${records.length}`, refused: 0 };
    records.push(r);
    const p = submit(c, r, tag)
      .then(() => follow(c, r, () => deadline))
      .finally(() => running.delete(p));
    running.add(p);
  }, 1000 / perSecond);
  return {
    records,
    async stop(timeoutMs = 180_000) {
      clearInterval(timer);
      deadline = Date.now() + timeoutMs;
      await Promise.all(running);
      for (const r of records.filter((x) => x.id && x.status === "completed")) {
        const res = await call(c, `/v1/tasks/${r.id}`, { timeoutMs: 10_000 }).catch(() => undefined);
        r.tokenAfter = res?.body.result?.token;
      }
      return records;
    },
  };
}
