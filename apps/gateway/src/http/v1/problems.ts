import type { QuotaRefusal } from "../../domain/quotas.ts";
import { validIdempotencyKey } from "../../domain/task-id.ts";
import { CancelError } from "../../tasks/cancel.ts";
import { RedriveError } from "../../tasks/redrive.ts";
import { SubmitError } from "../../tasks/submit.ts";
import { ProblemError } from "../problem.ts";

/** The request's Idempotency-Key header (submit, take): undefined when absent; a 400 naming the header when not 1-255 visible ASCII characters. */
export function idempotencyKeyOf(header: string | undefined): string | undefined {
  if (header !== undefined && !validIdempotencyKey(header))
    throw new ProblemError(400, "Invalid Idempotency-Key", undefined, [
      { field: "header.idempotency-key", message: "must be 1-255 visible ASCII characters" },
    ]);
  return header;
}

/** Maps a SubmitError onto problem+json; any other error is returned as it is. */
export function submitProblem(err: unknown): unknown {
  if (!(err instanceof SubmitError)) return err;
  switch (err.code) {
    case "idempotency_mismatch":
      return new ProblemError(422, "Idempotency Key Reused", err.message, [
        { field: "header.idempotency-key", message: "already used with a different request body" },
      ]);
    case "id_collision":
      return new ProblemError(409, "Conflict", err.message);
    case "queue_unavailable":
      return new ProblemError(503, "Queue Unavailable", err.message, undefined, { "retry-after": "1" });
    case "quota":
      return err.refusal ? quotaProblem(err.refusal) : new ProblemError(429, "Quota Exceeded", err.message);
  }
}

/** Maps a CancelError onto problem+json; any other error is returned as it is. */
export function cancelProblem(err: unknown): unknown {
  if (!(err instanceof CancelError)) return err;
  return new ProblemError(409, "Task Already Final", err.message);
}

/** Maps a RedriveError onto problem+json; any other error is returned as it is. */
export function redriveProblem(err: unknown): unknown {
  if (!(err instanceof RedriveError)) return err;
  switch (err.code) {
    case "params_erased":
      return new ProblemError(
        409,
        "Task Params Erased",
        "the task's params were erased by retention (TASK_RETENTION_DAYS); submit the task again",
        [{ field: "path.id", message: "params erased by retention" }],
      );
    case "not_failed":
      return new ProblemError(
        409,
        "Task Not Failed",
        `the task is ${err.state}; only failed (dead-lettered) tasks can be retried`,
      );
    case "quota":
      return err.refusal ? quotaProblem(err.refusal) : new ProblemError(429, "Quota Exceeded", err.message);
    case "queue_unavailable":
      return new ProblemError(503, "Queue Unavailable", "the task was not requeued; retry", undefined, {
        "retry-after": "1",
      });
  }
}

const QUOTA_TITLES: Record<QuotaRefusal["kind"], string> = {
  submitsPerSecond: "Submission Rate Limited",
  maxInFlight: "Too Many Tasks In Flight",
  dailySpend: "Daily Spend Limit Reached",
  highLane: "High Lane Not Allowed",
  maxRedrives: "Redrive Limit Reached",
};

/** A quota refusal as problem+json: 429 with Retry-After for a limit, 403 for a right; the quota named as the field. */
function quotaProblem(r: QuotaRefusal): ProblemError {
  return new ProblemError(
    r.status,
    QUOTA_TITLES[r.kind],
    r.message,
    [{ field: r.field, message: r.message }],
    r.retryAfter !== undefined ? { "retry-after": String(r.retryAfter) } : {},
  );
}
