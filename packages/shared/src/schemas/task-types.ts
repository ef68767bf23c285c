import { z } from "zod";
import {
  CALLBACK_URL_MAX_LENGTH,
  type CallbackPolicy,
  checkCallbackUrl,
  STRICT_CALLBACK_POLICY,
} from "../net/callback-url.ts";

/** Default cap on a decoded image, in bytes (docs/provider-protocol.md: sources disagree, 100 kB is the safe default). */
export const DEFAULT_IMAGE_MAX_BYTES = 100 * 1024;

const Url = z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }).max(2048);
const SiteKey = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[A-Za-z0-9_\-.]+$/, "only letters, digits, '-', '_' and '.'");

export const RecaptchaV2Params = z.strictObject({
  sitekey: SiteKey,
  pageurl: Url,
  invisible: z.boolean().optional(),
  enterprise: z.boolean().optional(),
  data_s: z.string().min(1).max(4096).optional(),
});
export type RecaptchaV2Params = z.infer<typeof RecaptchaV2Params>;

export const RecaptchaV3Params = z.strictObject({
  sitekey: SiteKey,
  pageurl: Url,
  action: z.string().min(1).max(128).optional(),
  min_score: z.number().min(0.1).max(0.9).optional(),
  enterprise: z.boolean().optional(),
});
export type RecaptchaV3Params = z.infer<typeof RecaptchaV3Params>;

export const TurnstileParams = z.strictObject({
  sitekey: SiteKey,
  pageurl: Url,
  action: z.string().min(1).max(128).optional(),
  cdata: z.string().min(1).max(1024).optional(),
});
export type TurnstileParams = z.infer<typeof TurnstileParams>;

export const GeetestParams = z.strictObject({
  gt: z.string().regex(/^[0-9a-f]{32}$/i, "must be 32 hex characters"),
  challenge: z
    .string()
    .min(1)
    .max(256)
    .regex(/^[A-Za-z0-9_\-]+$/, "only letters, digits, '-' and '_'"),
  pageurl: Url,
  api_server: z
    .string()
    .min(1)
    .max(256)
    .regex(/^[A-Za-z0-9.\-]+$/, "must be a host name")
    .optional(),
});
export type GeetestParams = z.infer<typeof GeetestParams>;

const Base64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** Decoded size of a base64 string without decoding it. */
export function base64DecodedBytes(b64: string): number {
  const pad = b64.endsWith("==") ? 2 : b64.endsWith("=") ? 1 : 0;
  return Math.floor((b64.length * 3) / 4) - pad;
}

/** Image params; the size cap is a setting, so the schema is built from it. */
export function imageParams(maxBytes: number = DEFAULT_IMAGE_MAX_BYTES) {
  return z.strictObject({
    body: z
      .string()
      .min(1, "must not be empty")
      .regex(Base64, "must be base64")
      .refine((b) => base64DecodedBytes(b) <= maxBytes, `decoded image must be at most ${maxBytes} bytes`),
    phrase: z.boolean().optional(),
    case_sensitive: z.boolean().optional(),
    numeric: z.union([z.literal(0), z.literal(1), z.literal(2), z.literal(3), z.literal(4)]).optional(),
    calc: z.boolean().optional(),
    min_len: z.number().int().min(1).max(20).optional(),
    max_len: z.number().int().min(1).max(20).optional(),
    language: z.union([z.literal(0), z.literal(1), z.literal(2)]).optional(),
    lang: z
      .string()
      .regex(/^[a-z]{2}$/, "must be a two-letter language code")
      .optional(),
    textinstructions: z.string().min(1).max(140).optional(),
  });
}
export const ImageParams = imageParams();
export type ImageParams = z.infer<typeof ImageParams>;

export const TaskType = z.enum(["recaptcha_v2", "recaptcha_v3", "turnstile", "geetest", "image"]);
export type TaskType = z.infer<typeof TaskType>;

export const Priority = z.enum(["high", "normal", "low"]);
export type Priority = z.infer<typeof Priority>;

/**
 * A task's `callbackUrl`: an https URL of a public host (the SSRF policy of net/callback-url.ts;
 * `policy` loosens it for dev stacks and tests). The value is kept as sent.
 */
export function callbackUrl(policy: CallbackPolicy = STRICT_CALLBACK_POLICY) {
  return z
    .string()
    .superRefine((v, ctx) => {
      const r = checkCallbackUrl(v, policy);
      if (!r.ok) ctx.addIssue({ code: "custom", message: r.reason });
    })
    .meta({
      format: "uri",
      maxLength: CALLBACK_URL_MAX_LENGTH,
      description: "https URL of a public host; receives a signed POST once the task reaches a final state",
    });
}

/** The task a client submits: `POST /v1/tasks` body. `callbacks` is the callbackUrl policy (strict by default). */
export function taskRequest(opts: { imageMaxBytes?: number; callbacks?: CallbackPolicy } = {}) {
  const common = {
    priority: Priority.default("normal"),
    /** Receives a signed POST once the task reaches a final state. */
    callbackUrl: callbackUrl(opts.callbacks).optional(),
    /** Do not start the task before this instant (docs/scheduling.md); checked against the clock by the gateway. */
    notBefore: z.iso
      .datetime({ offset: true, error: "must be an ISO-8601 instant with a time zone (e.g. 2026-12-06T09:00:00Z)" })
      .optional()
      .meta({ description: "ISO-8601 instant: the task is not started before it (at most 24 h ahead by default)" }),
    /** Have the token ready shortly before this instant; past it unsolved the task fails (NEED_BY_PASSED). */
    needBy: z.iso
      .datetime({ offset: true, error: "must be an ISO-8601 instant with a time zone (e.g. 2026-12-06T09:00:00Z)" })
      .optional()
      .meta({
        description:
          "ISO-8601 instant: the token should be ready shortly before it (started at needBy minus the type's p90 solve time); unsolved by then the task fails with NEED_BY_PASSED",
      }),
  };
  return z.discriminatedUnion(
    "type",
    [
      z.strictObject({ type: z.literal("recaptcha_v2"), params: RecaptchaV2Params, ...common }),
      z.strictObject({ type: z.literal("recaptcha_v3"), params: RecaptchaV3Params, ...common }),
      z.strictObject({ type: z.literal("turnstile"), params: TurnstileParams, ...common }),
      z.strictObject({ type: z.literal("geetest"), params: GeetestParams, ...common }),
      z.strictObject({ type: z.literal("image"), params: imageParams(opts.imageMaxBytes), ...common }),
    ],
    {
      error: (iss) =>
        iss.code === "invalid_union" ? `unknown task type; expected one of ${TaskType.options.join(", ")}` : undefined,
    },
  );
}
export const TaskRequest = taskRequest();
export type TaskRequest = z.infer<typeof TaskRequest>;
export type TaskParams = TaskRequest["params"];

type DistributivePick<T, K extends keyof T> = T extends unknown ? Pick<T, K> : never;
/** A task's type and params, with the params narrowed by the type. */
export type TaskSpec = DistributivePick<TaskRequest, "type" | "params">;
