export { kvClaims, NOTIFY_KEEP_MS, type NotifyClaims, openNotifyBucket } from "./claims.ts";
export { notifyEnv } from "./env.ts";
export {
  consoleLink,
  dedupeKey,
  escapeMrkdwn,
  type Notification,
  type NotificationKind,
  webhookBody,
} from "./message.ts";
export { createNotifier, type Notifier, type NotifierDeps, type NotifyOutcome } from "./sender.ts";
