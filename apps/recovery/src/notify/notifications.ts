// The recovery service's notifications (NOTIFY_WEBHOOK_URL): region fences, returns and takeovers
// from the lease keeper, breaker storms from the incident detector (service.ts), DLQ growth from
// the dead-letter stream. One sender per service, claims in the region's `notify_<region>` bucket, so
// each event is sent at most once however many services see it or restart.
import type { Logger } from "@pipeline/shared/log";
import { createNotifier, kvClaims, type Notifier, openNotifyBucket } from "@pipeline/shared/notify";
import { streams } from "@pipeline/shared/subjects";
import type { RecoveryConfig } from "../config.ts";
import type { RecoveryContext } from "../context.ts";
import { dlqGrowthNotification } from "./messages.ts";
import { growthTracker } from "./watch.ts";

export type NotifySettings = Pick<
  RecoveryConfig,
  "REGION" | "NOTIFY_WEBHOOK_URL" | "NOTIFY_CONSOLE_URL" | "NOTIFY_DLQ_GROWTH" | "NOTIFY_DLQ_WINDOW_MS"
>;

/** The service's notifier; undefined when NOTIFY_WEBHOOK_URL is not set. */
export async function openNotifier(
  config: NotifySettings,
  ctx: Pick<RecoveryContext, "nc">,
  log: Logger,
): Promise<Notifier | undefined> {
  if (!config.NOTIFY_WEBHOOK_URL) return undefined;
  const claims = kvClaims(await openNotifyBucket(ctx.nc, config.REGION));
  return createNotifier({ url: config.NOTIFY_WEBHOOK_URL, consoleUrl: config.NOTIFY_CONSOLE_URL, claims, log });
}

/** One round of the DLQ watch: the dead-letter stream's last sequence against the window's first. */
export function dlqGrowthWatch(config: NotifySettings, ctx: Pick<RecoveryContext, "jsm">, notifier: Notifier) {
  const growth = growthTracker(config.NOTIFY_DLQ_GROWTH, config.NOTIFY_DLQ_WINDOW_MS);
  return async () => {
    const info = await ctx.jsm.streams.info(streams.dlq(config.REGION));
    const g = growth.observe(info.state.last_seq, Date.now());
    if (g) notifier.post(dlqGrowthNotification(config.REGION, { ...g, windowMs: config.NOTIFY_DLQ_WINDOW_MS }));
  };
}

/** The watches on the service's timers (`every` runs a job now and every `ms`). */
export function startNotifyWatches(
  config: NotifySettings,
  ctx: Pick<RecoveryContext, "jsm">,
  notifier: Notifier,
  every: (ms: number, name: string, job: () => Promise<unknown>) => void,
): void {
  every(15_000, "dead letter watch", dlqGrowthWatch(config, ctx, notifier));
}
