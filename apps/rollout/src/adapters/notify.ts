// The controller's notices (domain/notice.ts) posted to the operators' webhook: claimed in the
// home region's `notify_<region>` bucket first, so a notice is posted at most once however many
// times the service restarts between its decision and the post (@pipeline/shared/notify).
import type { Logger } from "@pipeline/shared/log";
import type { NatsConnection } from "@pipeline/shared/nats";
import { createNotifier, kvClaims, type Notification, openNotifyBucket } from "@pipeline/shared/notify";
import type { RolloutConfig } from "../config.ts";
import type { Notice, NoticeKind } from "../domain/notice.ts";

const SEVERITY: Record<NoticeKind, Notification["severity"]> = {
  rollback: "critical",
  awaiting_promotion: "warning",
  inconclusive: "warning",
  promoted: "info",
  aborted: "info",
};

/** The notification of a controller notice (the console's rollout panel is what it links to). */
export function noticeNotification(n: Notice, region: string): Notification {
  return { ...n, severity: SEVERITY[n.kind], region, path: "/console#rollout" };
}

/** The controller's `notify` hook, or undefined when NOTIFY_WEBHOOK_URL is not set. */
export async function rolloutNotifier(
  config: Pick<RolloutConfig, "REGION" | "NOTIFY_WEBHOOK_URL" | "NOTIFY_CONSOLE_URL">,
  nc: NatsConnection,
  log: Logger,
): Promise<((n: Notice) => void) | undefined> {
  if (!config.NOTIFY_WEBHOOK_URL) return undefined;
  const notifier = createNotifier({
    url: config.NOTIFY_WEBHOOK_URL,
    consoleUrl: config.NOTIFY_CONSOLE_URL,
    claims: kvClaims(await openNotifyBucket(nc, config.REGION)),
    log,
  });
  return (n) => notifier.post(noticeNotification(n, config.REGION));
}
