// The notification settings every service that sends reads (recovery, rollout): one webhook URL,
// and the console's address for the links.
import { z } from "zod";

const HttpUrl = (what: string) =>
  z
    .string()
    .trim()
    .refine((u) => {
      try {
        const p = new URL(u).protocol;
        return p === "https:" || p === "http:";
      } catch {
        return false;
      }
    }, `${what}: an http:// or https:// URL`);

export const notifyEnv = {
  /**
   * A Slack-compatible incoming webhook (Slack, Mattermost, Rocket.Chat, a relay of your own);
   * empty: no notifications. A secret: it never reaches a log line.
   */
  NOTIFY_WEBHOOK_URL: z
    .union([z.literal(""), HttpUrl("the incoming webhook")])
    .optional()
    .transform((v) => v || undefined),
  /** The console's address as an operator reaches it (`https://console.fsn1.example.net`): the messages link to it. */
  NOTIFY_CONSOLE_URL: z
    .union([z.literal(""), HttpUrl("the console's address")])
    .optional()
    .transform((v) => v || undefined),
};
