import type { FieldError } from "@pipeline/shared/schemas";
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";

/** An expected HTTP failure, rendered as RFC 9457 problem+json by the app's onError. */
export class ProblemError extends Error {
  override name = "ProblemError";
  constructor(
    readonly status: ContentfulStatusCode,
    readonly title: string,
    readonly detail?: string,
    readonly errors?: FieldError[],
    readonly headers: Record<string, string> = {},
  ) {
    super(detail ?? title);
  }
}

const slug = (title: string) =>
  title
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-|-$/g, "");

/** Renders problem+json with the request id, so a client can quote it in a report. */
export function problemResponse(c: Context, p: ProblemError): Response {
  const body = {
    type: `https://captcha-pipeline.dev/problems/${slug(p.title)}`,
    title: p.title,
    status: p.status,
    ...(p.detail ? { detail: p.detail } : {}),
    instance: c.req.path,
    requestId: c.get("requestId") as string | undefined,
    ...(p.errors ? { errors: p.errors } : {}),
  };
  return c.newResponse(JSON.stringify(body), p.status, { "content-type": "application/problem+json", ...p.headers });
}
