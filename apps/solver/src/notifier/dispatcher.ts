import type { Logger } from "@pipeline/shared/log";
import { type CallbackPolicy, checkCallbackUrl, checkResolvedAddresses } from "@pipeline/shared/net";
import { toTaskView } from "@pipeline/shared/tasks";
import {
  clientSigningSecrets,
  signatureHeader,
  WEBHOOK_HEADERS,
  type WebhookGenerations,
} from "@pipeline/shared/webhooks";
import type { PostCallback, Resolve } from "../adapters/callback-http.ts";
import type { ClaimedDelivery, DeliveryStore } from "../adapters/deliveries.ts";
import { backoff } from "../domain/timing.ts";

/** How one attempt went. */
export type AttemptResult = "delivered" | "http_error" | "unreachable" | "dns_error";
/** How a delivery ended. */
export type DeliveryOutcome = "delivered" | "failed" | "refused" | "superseded";

export interface DispatcherDeps {
  store: DeliveryStore;
  /**
   * The master secrets, current first (and the previous one during a rotation): each callback is
   * signed with the task owner's own secret derived from each (`clientSigningSecrets`).
   */
  secrets: string[];
  /** Per client id, the generation of its secret (`WEBHOOK_CLIENT_GENERATIONS`); unlisted: 0. */
  generations?: WebhookGenerations;
  policy: CallbackPolicy;
  resolve: Resolve;
  post: PostCallback;
  timeoutMs: number;
  retryBaseMs: number;
  retryMaxMs: number;
  /** Attempts before a delivery is given up (`failed`). */
  maxAttempts: number;
  /** Age (from the final state) after which a failing delivery is given up. */
  maxAgeMs: number;
  /** Attempts in flight in this process. */
  concurrency: number;
  /** In-flight attempts per task owner and per callback host, fleet-wide. */
  tenantMaxInFlight: number;
  hostMaxInFlight: number;
  /** How often an idle dispatcher looks for due deliveries (other solvers' retries). */
  pollMs: number;
  workerId: string;
  /** How long a claimed delivery stays leased (default 2 x timeoutMs + 5 s): a dead solver's deliveries are retried after it. */
  leaseMs?: number;
  log: Logger;
  metrics?: { attempt(result: AttemptResult): void; outcome(outcome: DeliveryOutcome): void };
}

export interface Dispatcher {
  start(): void;
  /** Something may be due now (a delivery recorded, an attempt finished): look without waiting for the poll. */
  kick(): void;
  inFlight(): number;
  /** Stops claiming and waits for the attempts in flight (each bounded by the timeouts). */
  stop(): Promise<void>;
}

/** Errors of a connection that was never made (nothing was sent): the next address may be tried. */
const CONNECT_ERRORS = new Set(["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "EAFNOSUPPORT"]);

function errorCode(err: unknown): string | undefined {
  const e = err as { code?: unknown; cause?: { code?: unknown } } | undefined;
  return typeof e?.code === "string" ? e.code : typeof e?.cause?.code === "string" ? e.cause.code : undefined;
}

/** A transport error as stored and logged: its code and message, never the URL (its query may hold a secret). */
function describe(err: unknown, url: string): string {
  const e = err as { message?: unknown } | undefined;
  const code = errorCode(err);
  const message = String(e?.message ?? err)
    .split(url)
    .join("<callbackUrl>")
    .slice(0, 200);
  return code ? `${code}: ${message}` : message;
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    p,
    new Promise<never>(
      (_, reject) => (timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms)),
    ),
  ]).finally(() => clearTimeout(timer));
}

/**
 * Sends the callbacks recorded in `webhook_deliveries`. The table is the retry record: each
 * solver's dispatcher leases due rows (at most `concurrency` at once here, and at most
 * `tenantMaxInFlight` per task owner and `hostMaxInFlight` per host across the fleet), sends
 * each one, and writes the outcome: delivered; due again after a backoff; given up (`failed`)
 * past `maxAttempts` or `maxAgeMs`; or `refused` when the URL or any address its host resolves
 * to is outside the SSRF policy. A solver killed mid-attempt leaves a lease that expires
 * (2 x timeout + 5 s): another dispatcher sends it again, under the same delivery id.
 */
export function createDispatcher(deps: DispatcherDeps): Dispatcher {
  const inflight = new Set<Promise<void>>();
  const state = { running: false, kicked: false };
  const wakeup = createWakeup();
  let loop: Promise<void> | undefined;
  const kick = () => {
    state.kicked = true;
    wakeup.wake();
  };
  const launch = (d: ClaimedDelivery) => {
    const p: Promise<void> = attempt({ deps, kick }, d)
      .catch((err: Error) =>
        deps.log.warn(
          { taskId: d.taskId, deliveryId: d.deliveryId, err: err.message },
          "callback attempt not recorded; retried once its lease expires",
        ),
      )
      .finally(() => {
        inflight.delete(p);
        kick();
      });
    inflight.add(p);
  };
  return {
    start() {
      state.running = true;
      loop = claimLoop(deps, { state, inflight, launch, wait: wakeup.wait });
    },
    kick,
    inFlight: () => inflight.size,
    async stop() {
      state.running = false;
      wakeup.wake();
      await loop;
      await Promise.all([...inflight]);
    },
  };
}

/** A sleep that `wake()` ends early. */
function createWakeup(): { wait(ms: number): Promise<void>; wake(): void } {
  let wake: (() => void) | undefined;
  return {
    wake: () => wake?.(),
    wait: (ms) =>
      new Promise<void>((resolve) => {
        const t = setTimeout(done, ms);
        function done() {
          clearTimeout(t);
          wake = undefined;
          resolve();
        }
        wake = done;
      }),
  };
}

/**
 * Claims due deliveries while running, as many as there are free attempts, and launches each;
 * then waits for a kick or the poll.
 */
async function claimLoop(
  deps: DispatcherDeps,
  l: {
    state: { running: boolean; kicked: boolean };
    inflight: Set<Promise<void>>;
    launch(d: ClaimedDelivery): void;
    wait(ms: number): Promise<void>;
  },
): Promise<void> {
  const leaseMs = deps.leaseMs ?? 2 * deps.timeoutMs + 5000;
  const { state } = l;
  let claims = 0;
  let lastClaim = 0;
  while (state.running) {
    // A burst of kicks (attempts finishing together) is folded into one claim every 20 ms.
    const gap = 20 - (Date.now() - lastClaim);
    if (gap > 0) await Bun.sleep(gap);
    lastClaim = Date.now();
    state.kicked = false;
    const free = deps.concurrency - l.inflight.size;
    if (free > 0) {
      try {
        const batch = await deps.store.claim({
          limit: free,
          tenantCap: deps.tenantMaxInFlight,
          hostCap: deps.hostMaxInFlight,
          leaseMs,
          token: `${deps.workerId}:${++claims}`,
        });
        for (const d of batch) l.launch(d);
      } catch (err) {
        if (state.running) deps.log.warn({ err: (err as Error).message }, "claiming due callbacks failed; retrying");
        state.kicked = false;
      }
    }
    // A kick that came while claiming means another look at once.
    if (state.running && !state.kicked) await l.wait(deps.pollMs);
  }
}

/** What an attempt needs besides the delivery: the deps, and the dispatcher's kick (a retry due before the poll). */
interface AttemptContext {
  deps: DispatcherDeps;
  kick(): void;
}

/** A failed attempt recorded: due again after a backoff, or given up past the limits. */
async function retry(
  { deps, kick }: AttemptContext,
  d: ClaimedDelivery,
  status: number | null,
  error: string,
  result: AttemptResult,
) {
  deps.metrics?.attempt(result);
  const delayMs = backoff(d.attempts + 1, deps.retryBaseMs, deps.retryMaxMs);
  const r = await deps.store.retry(d, {
    status,
    error,
    delayMs,
    maxAttempts: deps.maxAttempts,
    maxAgeMs: deps.maxAgeMs,
  });
  if (!r)
    return deps.log.warn(
      { taskId: d.taskId, deliveryId: d.deliveryId },
      "callback lease lost before its outcome was written; another attempt follows",
    );
  if (r.gaveUp) {
    deps.metrics?.outcome("failed");
    deps.log.warn(
      { taskId: d.taskId, deliveryId: d.deliveryId, attempts: r.attempts, status, error },
      "callback given up: retry limit reached",
    );
    return;
  }
  deps.log.info(
    { taskId: d.taskId, deliveryId: d.deliveryId, attempts: r.attempts, status, error, retryInMs: delayMs },
    "callback not acknowledged; will retry",
  );
  if (delayMs < deps.pollMs) setTimeout(kick, delayMs).unref?.();
}

/** A delivery outside the SSRF policy: ended `refused`, never sent. */
async function refuse({ deps }: AttemptContext, d: ClaimedDelivery, reason: string) {
  await deps.store.end(d, "refused", reason);
  deps.metrics?.outcome("refused");
  deps.log.warn(
    { taskId: d.taskId, deliveryId: d.deliveryId, reason },
    "callback refused by the SSRF policy; not sent, not retried",
  );
}

type TaskOfDelivery = NonNullable<Awaited<ReturnType<DeliveryStore["task"]>>> & { callbackUrl: string };

/** One attempt of a claimed delivery: its task checked, its URL and addresses checked, the callback sent, the outcome written. */
async function attempt(c: AttemptContext, d: ClaimedDelivery): Promise<void> {
  const { deps } = c;
  const row = await currentTask(deps, d);
  if (!row) return;
  const checked = checkCallbackUrl(row.callbackUrl, deps.policy);
  if (!checked.ok) return refuse(c, d, `callbackUrl ${checked.reason}`);
  const { target } = checked;
  let candidates = target.literal ? [target.literal] : [];
  if (!target.literal) {
    let answers;
    try {
      answers = await withTimeout(deps.resolve(target.host), deps.timeoutMs, "DNS lookup");
    } catch (err) {
      return retry(c, d, null, `DNS: ${describe(err, row.callbackUrl)}`, "dns_error");
    }
    const r = checkResolvedAddresses(answers, deps.policy);
    if (!r.ok) return refuse(c, d, r.reason);
    // Every answer was checked: a connection refused by one (an unreachable IPv6 route, say)
    // falls back to the next, up to three.
    candidates = r.addresses.slice(0, 3);
  }
  const request = signedRequest(deps, d, row);
  let status = 0;
  for (const [i, pinned] of candidates.entries()) {
    try {
      ({ status } = await deps.post({
        url: target.url,
        address: pinned.address,
        family: pinned.family,
        timeoutMs: deps.timeoutMs,
        ...request,
      }));
      break;
    } catch (err) {
      if (i < candidates.length - 1 && CONNECT_ERRORS.has(errorCode(err) ?? "")) continue;
      return retry(c, d, null, describe(err, row.callbackUrl), "unreachable");
    }
  }
  if (status >= 200 && status < 300) {
    await deps.store.delivered(d, status);
    deps.metrics?.attempt("delivered");
    deps.metrics?.outcome("delivered");
    return;
  }
  return retry(c, d, status, `HTTP ${status}`, "http_error");
}

/**
 * The delivery's task, when it still has a callback URL and is in the state the delivery is
 * for; else the delivery ended (`failed`, `superseded`) and undefined.
 */
async function currentTask(deps: DispatcherDeps, d: ClaimedDelivery): Promise<TaskOfDelivery | undefined> {
  const row = await deps.store.task(d.taskId);
  if (!row?.callbackUrl) {
    await deps.store.end(d, "failed", "the task or its callbackUrl is gone");
    deps.metrics?.outcome("failed");
    return undefined;
  }
  if (`${row.id}:${row.state}:${row.redrives}` !== d.deliveryId) {
    // The task was redriven since: the delivery of its new final state notifies.
    await deps.store.end(d, "superseded", `the task is ${row.state} (redrive ${row.redrives}) now`);
    deps.metrics?.outcome("superseded");
    return undefined;
  }
  return row as TaskOfDelivery;
}

/** The callback's body and headers, signed with the task owner's secrets. */
function signedRequest(
  deps: DispatcherDeps,
  d: ClaimedDelivery,
  row: TaskOfDelivery,
): { body: string; headers: Record<string, string> } {
  const body = JSON.stringify({
    deliveryId: d.deliveryId,
    event: `task.${row.state}`,
    task: toTaskView(row, new Date()),
  });
  const ts = Math.floor(Date.now() / 1000);
  const headers = {
    "content-type": "application/json",
    [WEBHOOK_HEADERS.delivery]: d.deliveryId,
    [WEBHOOK_HEADERS.timestamp]: String(ts),
    [WEBHOOK_HEADERS.signature]: signatureHeader(
      clientSigningSecrets(deps.secrets, row.owner, deps.generations),
      ts,
      body,
    ),
  };
  return { body, headers };
}
