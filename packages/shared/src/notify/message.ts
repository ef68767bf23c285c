// What a notification says, and its body for a Slack-compatible incoming webhook (pure).
// One event, one key: the key is what makes "at most once per event" (./sender.ts claims it first).

/** What happened, coarsely: the kinds an operator filters a channel by. */
export type NotificationKind =
  | "rollback"
  | "awaiting_promotion"
  | "inconclusive"
  | "promoted"
  | "aborted"
  | "fenced"
  | "failover"
  | "breaker_storm"
  | "dlq_growth"
  | "incident";

export interface Notification {
  /** One per event (`rollback:<rollout id>`, `failover:<region>:<epoch>`): a second send of the same key is dropped. */
  key: string;
  kind: NotificationKind;
  /** `critical` pages a person; `warning` can wait for the morning; `info` is a record. */
  severity: "critical" | "warning" | "info";
  /** The region that saw it. */
  region: string;
  /** One line: what happened. */
  title: string;
  /** Why, with the figures behind it. */
  text: string;
  /** The console page that shows it, relative to the console's address (`/console`, `/console/timeline/<id>`). */
  path?: string;
}

const MARK: Record<Notification["severity"], string> = {
  critical: ":rotating_light:",
  warning: ":warning:",
  info: ":information_source:",
};

/** Slack's mrkdwn control characters, escaped as its docs ask (`&`, `<`, `>`). */
export function escapeMrkdwn(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** The console link of `n`, when the console's address is known. */
export function consoleLink(n: Pick<Notification, "path">, consoleUrl: string | undefined): string | undefined {
  if (!consoleUrl) return undefined;
  const base = consoleUrl.replace(/\/+$/, "").replace(/\/console$/, "");
  return `${base}${n.path ?? "/console"}`;
}

/**
 * The JSON of an incoming webhook: `text` (what Slack shows in notifications and what any
 * Slack-compatible receiver — Mattermost, Rocket.Chat, Discord's /slack endpoint — reads) and
 * `blocks` for Slack's richer layout. The machine-readable fields ride in `pipeline` (ignored by
 * Slack, read by a script or our tests).
 */
export function webhookBody(n: Notification, consoleUrl: string | undefined, at: Date) {
  const link = consoleLink(n, consoleUrl);
  const head = `${MARK[n.severity]} [${escapeMrkdwn(n.region)}] ${escapeMrkdwn(n.title)}`;
  const tail = link ? `\n<${link}|Open the console>` : "";
  const text = `${head}\n${escapeMrkdwn(n.text)}${tail}`;
  return {
    text,
    blocks: [
      { type: "section", text: { type: "mrkdwn", text } },
      {
        type: "context",
        elements: [
          { type: "mrkdwn", text: `${n.kind} · ${n.severity} · ${at.toISOString()} · ${escapeMrkdwn(n.key)}` },
        ],
      },
    ],
    pipeline: { key: n.key, kind: n.kind, severity: n.severity, region: n.region, at: at.toISOString(), link },
  };
}

/**
 * A KV key for `key` (KV keys allow `[-/_=.a-zA-Z0-9]`): other characters become `_`, and a key
 * longer than 200 characters is cut with its hash appended, so two events never share a key.
 */
export function dedupeKey(key: string, hash: (s: string) => string): string {
  const clean = key.replace(/[^-/_=.a-zA-Z0-9]/g, "_").replace(/^[.]+|[.]+$/g, "_");
  return clean.length <= 200 && clean === key ? clean : `${clean.slice(0, 150)}.${hash(key).slice(0, 32)}`;
}
