import type { TaskRow } from "@pipeline/shared/db";
import type { Logger } from "@pipeline/shared/log";
import { classifyError, toProviderParams, type ProviderProfile, type ProviderReply } from "@pipeline/shared/provider";
import type { Priority, TaskSpec, TaskType } from "@pipeline/shared/schemas";
import type { EventSink } from "../adapters/nats.ts";
import type { SolverStore } from "../adapters/pg.ts";
import type { Poller } from "../adapters/bulk-poller.ts";
import type { ProviderClient } from "../adapters/provider.ts";
import type { ProviderSlots } from "../adapters/slots.ts";
import type { Breaker } from "../domain/breaker.ts";
import type { KeyRing, ProviderKeyInUse } from "../domain/keyring.ts";
import type { Permits } from "../domain/permits.ts";
import { ack, nak, type Outcome } from "../domain/outcome.ts";
import { backoff, firstPollDelay, tokenExpiry } from "../domain/timing.ts";
import type { Sleeper } from "./sleeps.ts";

export interface HandlerDeps {
  workerId: string;
  store: SolverStore;
  provider: ProviderClient;
  /** Folds polls into bulk requests; without it each poll is its own request. */
  poller?: Poller;
  /**
   * Caps the tasks in their start phase (slot, claim, submit, checkpoint: the Postgres-heavy
   * part) at once; a task leaves it when it starts waiting for the provider. Without it,
   * thousands of deliveries arriving together queue thousands of queries at once.
   */
  admission?: Permits;
  slots: ProviderSlots;
  /** The provider key in use (it may change between two tasks: key rotation) and a breaker per key. */
  keys: KeyRing;
  /** With several regions: may this region make new provider submissions (its lease)? Absent: always. */
  fence?: { allows(): boolean };
  events: EventSink;
  log: Logger;
  threads: number;
  timing: {
    leaseMs: number;
    firstPollMs: number | undefined;
    pollIntervalMs: number;
    maxPolls: number;
    maxResubmits: number;
    maxAttempts: number;
    tokenTtlMs: number;
    retryBaseMs: number;
    retryMaxMs: number;
    slotWaitMs: number;
    /** How long an in.php call may take; a taker-over waits this long for a started submit to land. */
    providerTimeoutMs: number;
  };
  profile: ProviderProfile;
  /** Counters the worker exposes (dedup acks, resumes...). */
  counters: Record<string, number>;
  /** Metrics hooks (Prometheus in the service; absent in some tests). */
  metrics?: { event(name: string): void; solved(type: string, seconds: number): void };
  random?: () => number;
  /** The waits between steps (slot retries, first poll, poll interval): one timer for them all. */
  sleeper: Sleeper;
  /**
   * Park a task once its provider task is known (`{ kind: "parked" }`) instead of polling it
   * here: the worker's waiting room (waiting.ts) polls it and finishes it, so a waiting task is
   * a small record, not a suspended handler. Without it, the handler polls until the end.
   */
  parking?: boolean;
}

/** A task waiting for the provider's answer, as the handler leaves it to the waiting room. */
export interface Parked {
  taskId: string;
  type: TaskType;
  providerId: string;
  key: ProviderKeyInUse;
  /** The provider slot the task holds (released when it finishes). */
  slot: number;
  /** res.php calls made for it so far in this delivery. */
  polls: number;
  /** New provider tasks this delivery made for it (bounded by maxResubmits). */
  resubmits: number;
  firstDelayMs: number;
}

/** What the handler decided: an outcome for the message, or a task parked in the waiting room. */
export type Handled = Outcome | { kind: "parked"; parked: Parked };

/** Where the waiting room hands a task back to the handler: a reply it does not handle itself. */
export interface Resume {
  parked: Parked;
  /** The reply to act on first (an error); none when the key rotated or the poll budget ran out. */
  reply?: ProviderReply;
  /** Polls the waiting room made (they count against the poll budget). */
  pollsWaited: number;
}



/** Runs a write until it succeeds or `forMs` passes (then rethrows), backing off up to 2 s. */
async function persist<T>(write: () => Promise<T>, forMs: number, sleeper: Sleeper, signal: AbortSignal): Promise<T> {
  const until = Date.now() + forMs;
  for (let wait = 100; ; wait = Math.min(2000, wait * 2)) {
    try {
      return await write();
    } catch (err) {
      if (Date.now() + wait > until) throw err;
      await sleeper.sleep(wait, signal);
    }
  }
}

export interface Delivery {
  taskId: string;
  priority: Priority;
  deliveries: number;
}

/**
 * Takes one delivery of a task to its outcome. Guarantees: nothing calls the provider while the
 * breaker is open or without a provider slot (fleet-wide thread limit); a task already terminal
 * is acked without calling the provider; a row holding a provider id is polled, never
 * resubmitted; the provider id is stored before the first poll; every write is guarded by the
 * lease; a task past its deadline or attempts is dead-lettered.
 */
function counter(deps: Pick<HandlerDeps, "counters" | "metrics">) {
  return (k: string) => {
    deps.counters[k] = (deps.counters[k] ?? 0) + 1;
    deps.metrics?.event(k);
  };
}

export async function handleTask(d: Delivery, deps: HandlerDeps, signal: AbortSignal, resume?: Resume): Promise<Handled> {
  const key = deps.keys.current();
  const breaker = deps.keys.breaker(key.ref);
  // A fenced region takes no task up (a claim would spend an attempt on a task that cannot be
  // submitted); the ones already waiting at the provider go on being polled by the waiting room.
  if (!resume && deps.fence && !deps.fence.allows()) {
    counter(deps)("fencedWaits");
    return nak(2000 + (deps.random ?? Math.random)() * 1000, "region fenced");
  }
  if (!resume && !breaker.allows()) {
    counter(deps)("breakerWaits");
    return nak(breaker.retryInMs() + 200 + (deps.random ?? Math.random)() * 800, `breaker ${breaker.state()}`);
  }
  let admitted = false;
  const leave = () => {
    if (admitted) (admitted = false), deps.admission!.release();
  };
  // Back in for the finish (completion write, events): thousands of answers arriving together
  // must not queue thousands of writes either.
  const enter = async () => {
    if (admitted || !deps.admission) return;
    await deps.admission.acquire();
    admitted = true;
  };
  try {
    // A resumed task enters the cap only for its finishing writes (enter()).
    if (deps.admission && !resume) {
      await deps.admission.acquire();
      admitted = true;
    }
    return await admittedTask(d, deps, key, breaker, { leave, enter }, signal, resume);
  } finally {
    leave();
  }
}

interface Admission {
  /** Leaves the capped phase (the task starts waiting for the provider). */
  leave(): void;
  /** Enters it again (the answer is there: the finishing writes). */
  enter(): Promise<void>;
}

async function admittedTask(d: Delivery, deps: HandlerDeps, key: ProviderKeyInUse, breaker: Breaker, admission: Admission, signal: AbortSignal, resume?: Resume): Promise<Handled> {
  const { slots } = deps;
  const bump = counter(deps);
  const random = deps.random ?? Math.random;
  // A resumed task still holds the slot it was parked with (under the key it was submitted with).
  const slot = resume ? resume.parked.slot : await acquireSlot(d, deps, key.ref, signal);
  const slotKeyRef = resume ? resume.parked.key.ref : key.ref;
  if (slot === undefined) {
    bump("slotWaits");
    return nak(100 + random() * 400, "no provider slot free");
  }
  // On an exception (a hard stop mid-poll) the slot is parked: it frees itself once the task
  // has no provider task in flight. A task parked in the waiting room keeps it.
  let keepSlot = true;
  let parked = false;
  try {
    const r = await solveClaimed(d, deps, key, breaker, admission, signal, resume);
    if (r.park) {
      parked = true;
      return { kind: "parked", parked: { ...r.park, slot } };
    }
    keepSlot = r.providerTaskInFlight;
    return r.outcome;
  } finally {
    if (parked) {
      // the waiting room releases it
    } else if (keepSlot) await slots.park(slotKeyRef, slot, d.taskId).catch(() => {});
    else await slots.release(slotKeyRef, slot, d.taskId).catch(() => {});
  }
}

async function acquireSlot(d: Delivery, deps: HandlerDeps, keyRef: string, signal: AbortSignal): Promise<number | undefined> {
  const until = Date.now() + deps.timing.slotWaitMs;
  // High-lane tasks look again sooner, so they win free slots under contention.
  const every = d.priority === "high" ? 20 : d.priority === "normal" ? 60 : 120;
  for (;;) {
    const s = await deps.slots.acquire(keyRef, deps.threads, deps.workerId, d.taskId, deps.timing.leaseMs);
    if (s !== undefined || Date.now() >= until) return s;
    await deps.sleeper.sleep(every + Math.random() * every, signal);
  }
}

interface Solved {
  outcome: Outcome;
  /** True when the provider still works on the task (its slot must stay taken). */
  providerTaskInFlight: boolean;
  /** Set when the task goes to the waiting room (`outcome` is then unused). */
  park?: Omit<Parked, "slot">;
}

/** The breaker's reading of a provider reply: the provider's health, per key. */
export function observeReply(breaker: Breaker, profile: ProviderProfile, reply: ProviderReply): void {
  if (reply.kind === "transport") return breaker.failure();
  if (reply.kind !== "error") return breaker.success();
  const cls = classifyError(reply.code, profile);
  if (cls === "key_stops") breaker.keyStopped(reply.code);
  else if (cls === "retry") breaker.failure();
  else breaker.success();
}

/**
 * The finish of a solved task: the completion (guarded by the lease), the solve-time metric, the
 * `completed` event. Shared by the handler and the waiting room.
 */
export async function completeSolved(deps: HandlerDeps, taskId: string, type: TaskType, polls: number, reply: Extract<ProviderReply, { kind: "ok" }>): Promise<Outcome> {
  const { store, events, timing: t, workerId: w } = deps;
  const userAgent = typeof reply.extra?.useragent === "string" ? reply.extra.useragent : undefined;
  const expiresAt = tokenExpiry(type, new Date(), t.tokenTtlMs);
  const r = await store.complete(taskId, w, { token: reply.value, ...(userAgent ? { userAgent } : {}), expiresAt, polls });
  if (!r) return nak(t.leaseMs, "lease lost before completion; the holder finishes");
  deps.metrics?.solved(type, (r.completedAt.getTime() - r.createdAt.getTime()) / 1000);
  // The token rides in the event: EVENTS is the changelog a restored database is replayed
  // from (it is a stream, not a log; nothing prints event bodies).
  await events.publish({
    taskId,
    kind: "completed",
    state: "completed",
    version: r.version,
    data: { token: reply.value, userAgent: userAgent ?? null, expiresAt: expiresAt?.toISOString() ?? null, completedAt: r.completedAt.toISOString(), providerId: r.providerId },
  });
  return ack("completed");
}

/** The row of a task handed back by the waiting room, if it is still this worker's to finish. */
async function resumedRow(deps: HandlerDeps, taskId: string): Promise<{ row: TaskRow } | { outcome: Outcome }> {
  const row = await deps.store.get(taskId);
  if (!row) return { outcome: ack("no row for this task any more") };
  if (row.state === "completed" || row.state === "failed" || row.state === "cancelled") return { outcome: ack(`already ${row.state}`) };
  if (row.state !== "solving" || row.leaseOwner !== deps.workerId) return { outcome: nak(deps.timing.leaseMs, "no longer ours after waiting") };
  return { row };
}

async function solveClaimed(d: Delivery, deps: HandlerDeps, key: ProviderKeyInUse, breaker: Breaker, admission: Admission, signal: AbortSignal, resume?: Resume): Promise<Solved> {
  const { leave } = admission;
  const { store, provider, events, timing: t, workerId: w } = deps;
  const bump = counter(deps);
  const taskId = d.taskId;
  const done = (outcome: Outcome, providerTaskInFlight = false): Solved => ({ outcome, providerTaskInFlight });
  let row: TaskRow;
  if (resume) {
    // Handed back by the waiting room: still claimed by this worker, nothing to claim again.
    const r = await resumedRow(deps, taskId);
    if ("outcome" in r) return done(r.outcome);
    row = r.row;
  } else {
    const claim = await store.claim(taskId, w, t.leaseMs);
    if (claim.kind === "missing") {
      bump("orphanMessages");
      return done(ack("no row for this task (never accepted)"));
    }
    if (claim.kind === "terminal") {
      bump("dedupAcks");
      return done(ack(`already ${claim.row.state}`));
    }
    if (claim.kind === "busy") {
      bump("busyNaks");
      return done(nak(claim.leaseLeftMs + 500, "another worker holds the lease"));
    }
    row = claim.row;
    if (d.deliveries > 1) bump("redeliveries");
  }
  const type = row.type as TaskType;
  let providerId = row.providerId;
  let polls = resume ? resume.parked.polls : 0;
  let resubmits = resume?.parked.resubmits ?? 0;
  /** The reply the waiting room handed back, and its polls (the budget), for the first poll round. */
  let pending = resume?.reply;
  let pollsWaited = resume?.pollsWaited ?? 0;
  /** How long a parked task waits before its first poll (after a fresh submit: the type's delay). */
  let firstDelayMs = 0;

  const deadLetter = async (reason: string, code: string): Promise<Solved> => {
    const r = await store.fail(taskId, w, { code, message: `dead-lettered: ${reason}`, polls });
    if (r) {
      bump("deadLettered");
      await events.publish({ taskId, kind: "failed", state: "failed", version: r.version, data: { code, deadLetter: reason } });
      await events.deadLetter(taskId, type, { reason, code, attempts: r.attempts, redrives: r.redrives });
    }
    return done(ack(`dead-lettered: ${reason}`));
  };
  const pastDeadline = (extraMs = 0) => row.deadlineAt !== null && Date.now() + extraMs > row.deadlineAt.getTime();
  if (!resume) {
    if (pastDeadline()) return deadLetter("deadline passed", row.errorCode ?? "DEADLINE_EXCEEDED");
    if (row.attempts > t.maxAttempts) return deadLetter("max attempts", row.errorCode ?? "MAX_ATTEMPTS");
    await events.publish({ taskId, kind: "solving", state: "solving", version: row.version, data: { worker: w, attempt: row.attempts } });
  }
  const retryLater = async (code: string | undefined, delayMs: number, why: string): Promise<Solved> => {
    if (row.attempts >= t.maxAttempts) return deadLetter("max attempts", code ?? "MAX_ATTEMPTS");
    if (pastDeadline(delayMs)) return deadLetter("deadline passed", code ?? "DEADLINE_EXCEEDED");
    const r = await store.release(taskId, w, { polls, ...(code ? { code } : {}) });
    if (r) await events.publish({ taskId, kind: "retrying", state: "retrying", version: r.version, data: { code, delayMs } });
    return done(nak(delayMs, why), providerId !== null);
  };
  const failTask = async (code: string): Promise<Solved> => {
    const r = await store.fail(taskId, w, { code, polls });
    if (r) await events.publish({ taskId, kind: "failed", state: "failed", version: r.version, data: { code } });
    return done(ack(`failed: ${code}`));
  };
  const retryDelay = () => backoff(row.attempts, t.retryBaseMs, t.retryMaxMs);

  /** The provider's health as the breaker sees it. */
  const observe = (reply: ProviderReply) => observeReply(breaker, deps.profile, reply);
  /** A key-level error: the task waits (no attempt is spent on it), the breaker is open. */
  const keyStopped = async (code: string): Promise<Solved> => {
    deps.log.error({ taskId, code }, "provider key stopped; breaker open, task waits");
    const r = await store.release(taskId, w, { polls, code });
    if (r) await events.publish({ taskId, kind: "retrying", state: "retrying", version: r.version, data: { code } });
    return done(nak(breaker.retryInMs() + 500, `key stopped: ${code}`), providerId !== null);
  };

  // A previous holder presumed dead (its lease ran out) may be alive and mid-submit: wait for its
  // checkpoint rather than submit the same captcha a second time.
  if (!providerId && row.submitStartedAt && row.submitOwner !== w) {
    const graceEnd = row.submitStartedAt.getTime() + t.providerTimeoutMs + 1000;
    while (!providerId && Date.now() < graceEnd) {
      await deps.sleeper.sleep(200, signal);
      const now = await store.get(taskId);
      if (!now || now.leaseOwner !== w || now.state !== "solving") return done(nak(t.leaseMs, "no longer ours while waiting for a started submit"));
      if (now.providerId) {
        providerId = now.providerId;
        bump("adoptedSubmits");
      } else if (!now.submitStartedAt) break; // that submit created nothing
    }
  }
  // A provider task of a key no longer in use (rotated away, maybe leaked) is never polled with
  // it again: the task is submitted anew with the current key.
  if (providerId && row.providerKeyRef && row.providerKeyRef !== key.ref) {
    deps.log.info({ taskId, from: row.providerKeyRef, to: key.ref }, "provider key rotated; submitting anew with the current key");
    if (!(await store.clearProviderId(taskId, w))) return done(nak(t.leaseMs, "lease lost"));
    bump("keyRotationResubmits");
    providerId = null;
  }
  if (providerId && !resume) bump("resumedPolls");
  for (;;) {
    if (!providerId) {
      // A fenced region (cut off from the witness, or its lease taken over) pays for nothing new.
      if (deps.fence && !deps.fence.allows()) return done(nak(2000, "region fenced: no new provider submissions"));
      // Cancelled (or lease lost) since the claim: never submit afterwards.
      if (!(await store.beginSubmit(taskId, w))) return done(nak(t.leaseMs, "no longer ours (cancelled or taken over)"));
      deps.log.debug({ taskId, attempt: row.attempts, delivery: d.deliveries, resubmits, earlier: row.providerSubmissions }, "provider submit");
      const reply = await provider.submit(toProviderParams({ type, params: row.params } as TaskSpec), key.value, signal);
      observe(reply);
      if (reply.kind !== "ok") await store.endSubmit(taskId, w);
      // A timed-out in.php may have created a provider task we will never hear of: the retry
      // then pays twice. Said at warn so an operator can count them.
      if (reply.kind === "transport") deps.log.warn({ taskId, reason: reply.reason }, "provider submit unanswered; the retry may pay twice");
      if (reply.kind === "ok") {
        const pid = reply.value;
        // The provider has the task now: losing this write means paying for it twice, so it is
        // retried through a database outage (for as long as a lease could have lasted, at least a minute).
        const cp = await persist(() => store.setProviderId(taskId, w, pid, key.ref), Math.max(60_000, t.leaseMs * 2), deps.sleeper, signal);
        deps.log.debug({ taskId, written: cp.written, stillOwner: cp.stillOwner }, "provider id checkpointed");
        if (!cp.stillOwner) return done(nak(t.leaseMs, "lease lost after submit; the new holder polls"));
        providerId = reply.value;
        await events.publish({ taskId, kind: "submitted", state: "solving", version: row.version, data: { providerId, keyRef: key.ref } });
        leave();
        if (deps.parking) firstDelayMs = firstPollDelay(type, t.firstPollMs);
        else await deps.sleeper.sleep(firstPollDelay(type, t.firstPollMs), signal);
      } else if (reply.kind === "error") {
        const cls = classifyError(reply.code, deps.profile);
        if (cls === "task_fails") return failTask(reply.code);
        if (cls === "key_stops") return keyStopped(reply.code);
        if (cls === "resubmit") {
          resubmits++;
          if (resubmits > t.maxResubmits) return failTask(reply.code);
          continue;
        }
        return retryLater(reply.code, retryDelay(), `submit: ${reply.code}`);
      } else {
        return retryLater(reply.kind === "transport" ? "TRANSPORT" : undefined, retryDelay(), `submit: ${reply.kind === "transport" ? reply.reason : "not ready"}`);
      }
    }
    if (deps.parking && pending === undefined && pollsWaited === 0) {
      // The wait goes on in the waiting room.
      return { outcome: ack("parked"), providerTaskInFlight: true, park: { taskId, type, providerId, key, polls, resubmits, firstDelayMs } };
    }
    const r = await pollUntilDone(providerId);
    if (r === "rotated") {
      // The key changed mid-poll: the next delivery submits with the new key (and its slots).
      deps.log.info({ taskId, from: key.ref, to: deps.keys.current().ref }, "provider key rotated while polling; submitting anew with the current key");
      if (!(await store.clearProviderId(taskId, w))) return done(nak(t.leaseMs, "lease lost"));
      bump("keyRotationResubmits");
      providerId = null;
      return retryLater(undefined, 50, "provider key rotated");
    }
    if (r === "resubmit") {
      resubmits++;
      if (resubmits > t.maxResubmits) return failTask("ERROR_CAPTCHA_UNSOLVABLE");
      if (!(await store.clearProviderId(taskId, w))) return done(nak(t.leaseMs, "lease lost"));
      providerId = null;
      continue;
    }
    return r;
  }

  async function pollUntilDone(pid: string): Promise<Solved | "resubmit" | "rotated"> {
    let transportErrors = 0;
    leave();
    // A task handed back by the waiting room acts on its reply first, its polls counted.
    const start = pollsWaited;
    pollsWaited = 0;
    for (let n = start; n < t.maxPolls; n++) {
      let reply: ProviderReply;
      if (pending) {
        reply = pending;
        pending = undefined;
      } else {
        if (deps.keys.current().ref !== key.ref) return "rotated";
        reply = deps.poller ? await deps.poller.poll(pid, key.value, type, signal) : await provider.poll(pid, key.value, signal);
        polls++;
        observe(reply);
      }
      if (reply.kind === "ok") {
        await admission.enter();
        return done(await completeSolved(deps, taskId, type, polls, reply));
      }
      if (reply.kind === "not_ready") {
        await deps.sleeper.sleep(t.pollIntervalMs, signal);
        continue;
      }
      if (reply.kind === "error") {
        const cls = classifyError(reply.code, deps.profile);
        if (cls === "resubmit") {
          deps.log.info({ taskId, code: reply.code }, "provider gave the task up; submitting anew");
          return "resubmit";
        }
        if (cls === "task_fails") return failTask(reply.code);
        if (cls === "key_stops") return keyStopped(reply.code);
      }
      // Retryable while polling: the same request again after a pause, within the poll budget.
      transportErrors++;
      await deps.sleeper.sleep(Math.max(t.pollIntervalMs, backoff(transportErrors, t.retryBaseMs, t.retryMaxMs)), signal);
    }
    // The poll budget is spent: the provider gives up on its own well before 20 polls.
    deps.log.warn({ taskId, polls: t.maxPolls }, "poll budget spent; submitting anew");
    return "resubmit";
  }
}
