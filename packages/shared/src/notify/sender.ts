// The webhook sender: one POST of a Slack-compatible body per event (./message.ts), claimed first
// (./claims.ts) so no event is sent twice, retried only when the receiver surely did not take it
// (connection refused, 429, 502/503/504: a receiver that timed out may have posted it, so a
// timeout is not retried). The URL is a secret (a Slack webhook URL carries its token): it never
// reaches a log line; the logs name the receiver's host only.
import type { Logger } from "../log.ts";
import type { NotifyClaims } from "./claims.ts";
import { type Notification, webhookBody } from "./message.ts";

export type NotifyOutcome = "sent" | "duplicate" | "off" | "failed";

export interface NotifierDeps {
  /** NOTIFY_WEBHOOK_URL; undefined: notifications are off (every notify answers "off"). */
  url: string | undefined;
  /** NOTIFY_CONSOLE_URL: the console's address the messages link to. */
  consoleUrl?: string | undefined;
  claims: NotifyClaims;
  log: Logger;
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
  timeoutMs?: number;
  attempts?: number;
  /** The first retry's wait; each next one doubles. */
  backoffMs?: number;
  now?: () => Date;
  /** Told of each outcome (a metric). */
  onOutcome?: (n: Notification, outcome: NotifyOutcome) => void;
}

export interface Notifier {
  notify(n: Notification): Promise<NotifyOutcome>;
  /** Fire and forget: the outcome is logged. */
  post(n: Notification): void;
}

const RETRY_STATUS = new Set([429, 502, 503, 504]);

/** Whether a failed fetch surely never reached the receiver (so a retry cannot post twice). */
function neverDelivered(err: unknown): boolean {
  const e = err as { code?: string; name?: string; message?: string };
  if (e?.name === "TimeoutError" || e?.name === "AbortError") return false;
  return /ECONNREFUSED|ConnectionRefused|ENOTFOUND|EHOSTUNREACH|ENETUNREACH|Unable to connect/i.test(
    `${e?.code ?? ""} ${e?.message ?? ""}`,
  );
}

/** One attempt: "ok", "retry" (surely not taken) or "stop" (refused, or maybe taken). */
async function attempt(d: NotifierDeps, body: string): Promise<{ result: "ok" | "retry" | "stop"; why: string }> {
  try {
    const res = await (d.fetch ?? fetch)(d.url!, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
      signal: AbortSignal.timeout(d.timeoutMs ?? 5000),
      redirect: "error",
    });
    await res.arrayBuffer().catch(() => undefined);
    if (res.ok) return { result: "ok", why: `HTTP ${res.status}` };
    return { result: RETRY_STATUS.has(res.status) ? "retry" : "stop", why: `HTTP ${res.status}` };
  } catch (err) {
    const why = (err as Error).name === "TimeoutError" ? "timed out" : (err as Error).message;
    return { result: neverDelivered(err) ? "retry" : "stop", why };
  }
}

function hostOf(url: string | undefined): string {
  try {
    return url ? new URL(url).host : "";
  } catch {
    return "";
  }
}

export function createNotifier(d: NotifierDeps): Notifier {
  const host = hostOf(d.url);
  const send = async (n: Notification): Promise<NotifyOutcome> => {
    if (!d.url) return "off";
    let claimed: boolean;
    try {
      claimed = await d.claims.claim(n.key);
    } catch (err) {
      // Without the claim a second process might send it too: not sent (the alert rules still fire).
      d.log.error(
        { event: n.key, kind: n.kind, err: (err as Error).message },
        "notification not sent: its claim failed",
      );
      return "failed";
    }
    if (!claimed) return "duplicate";
    const body = JSON.stringify(webhookBody(n, d.consoleUrl, (d.now ?? (() => new Date()))()));
    const tries = Math.max(1, d.attempts ?? 3);
    for (let i = 1; ; i++) {
      const r = await attempt(d, body);
      if (r.result === "ok") {
        d.log.info({ event: n.key, kind: n.kind, to: host }, "notification sent");
        return "sent";
      }
      if (r.result === "stop" || i >= tries) {
        d.log.error({ event: n.key, kind: n.kind, to: host, why: r.why, attempts: i }, "notification not delivered");
        return "failed";
      }
      await Bun.sleep((d.backoffMs ?? 1000) * 2 ** (i - 1));
    }
  };
  return {
    async notify(n) {
      const outcome = await send(n);
      d.onOutcome?.(n, outcome);
      return outcome;
    },
    post(n) {
      void this.notify(n).catch((err: Error) => d.log.error({ event: n.key, err: err.message }, "notification failed"));
    },
  };
}
