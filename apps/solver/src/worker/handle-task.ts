import type { TaskRow } from "@pipeline/shared/db";
import { classifyError, toProviderParams, type ProviderProfile, type ProviderReply } from "@pipeline/shared/provider";
import type { TaskSpec, TaskType } from "@pipeline/shared/schemas";
import type { Logger } from "@pipeline/shared/log";
import type { EventSink } from "../adapters/nats.ts";
import type { SolverStore } from "../adapters/pg.ts";
import type { ProviderClient } from "../adapters/provider.ts";
import { ack, nak, type Outcome } from "../domain/outcome.ts";
import { backoff, firstPollDelay, tokenExpiry } from "../domain/timing.ts";

export interface HandlerDeps {
  workerId: string;
  store: SolverStore;
  provider: ProviderClient;
  events: EventSink;
  log: Logger;
  timing: {
    leaseMs: number;
    firstPollMs: number | undefined;
    pollIntervalMs: number;
    maxPolls: number;
    maxResubmits: number;
    tokenTtlMs: number;
    retryBaseMs: number;
    retryMaxMs: number;
  };
  profile: ProviderProfile;
  /** Counters the worker exposes (dedup acks, resumes...). */
  counters: Record<string, number>;
}

/** Sleeps, or throws when the signal aborts (a hard stop). */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const t = setTimeout(() => (signal.removeEventListener("abort", onAbort), resolve()), ms);
    const onAbort = () => (clearTimeout(t), reject(signal.reason));
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

const bump = (c: Record<string, number>, k: string) => (c[k] = (c[k] ?? 0) + 1);

/**
 * Takes one delivery of a task to its outcome. Guarantees: a task already terminal is acked
 * without calling the provider; a row holding a provider id is polled, never resubmitted; the
 * provider id is stored before the first poll; every write is guarded by the lease.
 */
export async function handleTask(taskId: string, deliveries: number, deps: HandlerDeps, signal: AbortSignal): Promise<Outcome> {
  const { store, provider, events, timing: t, workerId: w, counters } = deps;
  const claim = await store.claim(taskId, w, t.leaseMs);
  if (claim.kind === "missing") {
    bump(counters, "orphanMessages");
    return ack("no row for this task (never accepted)");
  }
  if (claim.kind === "terminal") {
    bump(counters, "dedupAcks");
    return ack(`already ${claim.row.state}`);
  }
  if (claim.kind === "busy") {
    bump(counters, "busyNaks");
    return nak(claim.leaseLeftMs + 500, "another worker holds the lease");
  }
  const row = claim.row;
  if (deliveries > 1) bump(counters, "redeliveries");
  await events.publish({ taskId, kind: "solving", state: "solving", version: row.version, data: { worker: w, attempt: row.attempts } });
  const type = row.type as TaskType;
  let providerId = row.providerId;
  let polls = 0;
  let resubmits = 0;
  const retryLater = async (code: string | undefined, delayMs: number, why: string): Promise<Outcome> => {
    const r = await store.release(taskId, w, { polls, ...(code ? { code } : {}) });
    if (r) await events.publish({ taskId, kind: "retrying", state: "retrying", version: r.version, data: { code, delayMs } });
    return nak(delayMs, why);
  };
  const failTask = async (code: string): Promise<Outcome> => {
    const r = await store.fail(taskId, w, { code, polls });
    if (r) await events.publish({ taskId, kind: "failed", state: "failed", version: r.version, data: { code } });
    return ack(`failed: ${code}`);
  };
  const retryDelay = () => backoff(row.attempts, t.retryBaseMs, t.retryMaxMs);
  const keyStopDelay = Math.max(t.retryMaxMs, 30_000);

  /** Applies an error code; returns an outcome, or "resubmit" to start a new provider task. */
  const onError = async (reply: Extract<ProviderReply, { kind: "error" | "transport" }>): Promise<Outcome | "resubmit" | "again"> => {
    if (reply.kind === "transport") return "again";
    const cls = classifyError(reply.code, deps.profile);
    if (cls === "task_fails") return failTask(reply.code);
    if (cls === "key_stops") {
      deps.log.error({ taskId, code: reply.code }, "provider key stopped; task waits");
      return retryLater(reply.code, keyStopDelay, `key stopped: ${reply.code}`);
    }
    if (cls === "resubmit") return "resubmit";
    return "again";
  };

  if (providerId) bump(counters, "resumedPolls");
  for (;;) {
    if (!providerId) {
      const reply = await provider.submit(toProviderParams({ type, params: row.params } as TaskSpec), signal);
      if (reply.kind === "ok") {
        if (!(await store.setProviderId(taskId, w, reply.value))) return ack("lease lost after submit");
        providerId = reply.value;
        await events.publish({ taskId, kind: "submitted", state: "solving", version: row.version, data: { providerId } });
        await sleep(firstPollDelay(type, t.firstPollMs), signal);
      } else if (reply.kind === "not_ready") {
        return retryLater(undefined, retryDelay(), "unexpected not-ready on submit");
      } else {
        const next = await onError(reply);
        if (next === "again" || next === "resubmit") return retryLater(reply.kind === "error" ? reply.code : "TRANSPORT", retryDelay(), `submit: ${reply.kind === "error" ? reply.code : reply.reason}`);
        return next;
      }
    }
    const pollOutcome = await pollUntilDone(providerId);
    if (pollOutcome === "resubmit") {
      resubmits++;
      if (resubmits > t.maxResubmits) return failTask("ERROR_CAPTCHA_UNSOLVABLE");
      if (!(await store.clearProviderId(taskId, w))) return ack("lease lost");
      providerId = null;
      continue;
    }
    return pollOutcome;
  }

  async function pollUntilDone(pid: string): Promise<Outcome | "resubmit"> {
    let transportErrors = 0;
    for (let n = 0; n < t.maxPolls; n++) {
      const reply = await provider.poll(pid, signal);
      polls++;
      if (reply.kind === "ok") {
        const solvedAt = new Date();
        const userAgent = typeof reply.extra?.useragent === "string" ? reply.extra.useragent : undefined;
        const r = await store.complete(taskId, w, { token: reply.value, ...(userAgent ? { userAgent } : {}), expiresAt: tokenExpiry(type, solvedAt, t.tokenTtlMs), polls });
        if (!r) return ack("lease lost before completion");
        await events.publish({ taskId, kind: "completed", state: "completed", version: r.version, data: { expiresAt: r.tokenExpiresAt?.toISOString() ?? null } });
        return ack("completed");
      }
      if (reply.kind === "not_ready") {
        await sleep(t.pollIntervalMs, signal);
        continue;
      }
      const next = await onError(reply);
      if (next === "resubmit") return "resubmit";
      if (next === "again") {
        transportErrors++;
        await sleep(Math.max(t.pollIntervalMs, backoff(transportErrors, t.retryBaseMs, t.retryMaxMs)), signal);
        continue;
      }
      return next;
    }
    // The poll budget is spent: the provider gives up on its own well before 20 polls.
    return "resubmit";
  }
}
