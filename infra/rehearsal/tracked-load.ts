// A drill's clients: tasks submitted through the load balancer at a steady rate, each followed to
// its final status, as an automation suite would. A submission is retried with the same
// idempotency key (1 s apart, 6 attempts, the last 3 through the other region's LB when there is
// one) when it is not acknowledged; a status read that fails is read again. After the load stops, every acknowledged task is read once more: a token other than
// the first one seen is a double result (drill-line.ts).
import { call, type LbClient } from "./client.ts";
import { isFinal, type TaskRecord } from "./drill-line.ts";
import { sleep } from "./exec.ts";

interface View {
  id?: string;
  status?: string;
  result?: { token?: string };
  error?: { code?: string };
  /** Where the answer came from (set by `read`). */
  via?: string;
}

/**
 * Submits through the home region's LB; with another region's (`clients[1]`), the last 3 of the 6
 * attempts go there, as a client that knows both regions' URLs would.
 */
async function submit(clients: LbClient[], r: TaskRecord & { via?: number }, tag: string): Promise<void> {
  for (let attempt = 0; attempt < 6 && !r.id; attempt++) {
    if (attempt) await sleep(1000);
    const via = attempt >= 3 && clients.length > 1 ? 1 : 0;
    try {
      const res = await call<View>(clients[via]!, "/v1/tasks", {
        method: "POST",
        headers: { "idempotency-key": r.key },
        timeoutMs: 10_000,
        body: {
          type: "turnstile",
          params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/rehearsal/${tag}/${r.key}` },
        },
      });
      if ((res.status === 202 || res.status === 200) && res.body.id) {
        r.id = res.body.id;
        r.acceptedAt = Date.now();
        r.via = via;
        return;
      }
    } catch {}
    r.refused++;
  }
}

/** One read: the task's status (and token once final), or undefined when the read failed. */
async function read(c: LbClient, id: string, wait: number): Promise<View | undefined> {
  try {
    const res = await call<View>(c, `/v1/tasks/${id}${wait ? `?wait=${wait}` : ""}`, { timeoutMs: (wait + 3) * 1000 });
    return res.status === 200 ? { ...res.body, via: res.address ?? c.url } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Follows the task until it is final or `until` (epoch ms) passes: short long-polls where it was
 * accepted (an answer cut by a host's death costs at most 8 s); once it is 20 s old, a read of the
 * other region's LB too, whose replica knows it (a client reaching the surviving region).
 */
async function follow(clients: LbClient[], r: TaskRecord & { via?: number }, until: () => number): Promise<void> {
  while (r.id && !isFinal(r.status) && Date.now() < until()) {
    const home = clients[r.via ?? 0]!;
    const other = clients.find((c) => c !== home);
    let v = await read(home, r.id, 5);
    if (!isFinal(v?.status) && other && Date.now() - r.acceptedAt! > 20_000) v = (await read(other, r.id, 0)) ?? v;
    if (!v) await sleep(1000);
    else {
      r.status = v.status;
      if (isFinal(r.status)) {
        r.finalAt = Date.now();
        r.token = v.result?.token;
        if (v.error?.code) r.errorCode = v.error.code;
        r.finalVia = v.via;
      }
    }
  }
}

export interface TrackedLoad {
  records: TaskRecord[];
  /** Stops submitting; waits until every acknowledged task is final or `timeoutMs` passed; reads each once more. */
  stop(timeoutMs?: number): Promise<TaskRecord[]>;
}

/** The load through `clients[0]` (the home region's LB); `clients[1]`, another region's, when a client knows it. */
export function startTrackedLoad(clients: LbClient[], perSecond: number, tag: string): TrackedLoad {
  const records: Array<TaskRecord & { via?: number }> = [];
  const running = new Set<Promise<void>>();
  let deadline = Number.POSITIVE_INFINITY;
  const timer = setInterval(() => {
    const r: TaskRecord = { key: `${tag}-${records.length}`, refused: 0 };
    records.push(r);
    const p = submit(clients, r, tag)
      .then(() => follow(clients, r, () => deadline))
      .finally(() => running.delete(p));
    running.add(p);
  }, 1000 / perSecond);
  return {
    records,
    async stop(timeoutMs = 180_000) {
      clearInterval(timer);
      deadline = Date.now() + timeoutMs;
      await Promise.all(running);
      // Where it was accepted (after a region's cut healed, that region has its result too).
      for (const r of records.filter((x) => x.id && x.status === "completed"))
        r.tokenAfter = (await read(clients[r.via ?? 0]!, r.id!, 0))?.result?.token;
      return records;
    },
  };
}
