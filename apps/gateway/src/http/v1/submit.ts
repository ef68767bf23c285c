import { homeRegionVariants, withHomeRegion } from "@pipeline/shared/regions";
import { fieldErrors, type TaskRequest, taskRequest } from "@pipeline/shared/schemas";
import type { Context } from "hono";
import type { GatewayDeps } from "../../deps.ts";
import { planSchedule, type SchedulePlan } from "../../domain/schedule.ts";
import { deriveTaskId } from "../../domain/task-id.ts";
import { SubmitError, submitTask } from "../../tasks/submit.ts";
import type { GatewayEnvVars } from "../env.ts";
import { ProblemError } from "../problem.ts";
import { idempotencyKeyOf, submitProblem } from "./problems.ts";

/** `POST /v1/tasks`: a 202 once the task is in Postgres and acknowledged by JetStream. */
export function submitRoute(deps: GatewayDeps) {
  // callbackUrl is checked against the SSRF policy here (a refusal is a 400 naming callbackUrl,
  // nothing stored) and again by the solver when it sends, after resolving the host.
  const schema = taskRequest({
    imageMaxBytes: deps.config.IMAGE_MAX_BYTES,
    callbacks: {
      allowHttp: deps.config.WEBHOOK_ALLOW_HTTP ?? false,
      allowPrivate: deps.config.WEBHOOK_ALLOW_PRIVATE ?? false,
    },
  });
  return async (c: Context<GatewayEnvVars>) => {
    const clientId = c.get("clientId");
    refuseWhenFenced(deps);
    const ct = c.req.header("content-type") ?? "";
    if (!/^application\/json\b/i.test(ct))
      throw new ProblemError(415, "Unsupported Media Type", "send the task as application/json", [
        { field: "header.content-type", message: "must be application/json" },
      ]);
    const idem = idempotencyKeyOf(c.req.header("idempotency-key"));
    let raw: unknown;
    try {
      raw = await c.req.json();
    } catch {
      throw new ProblemError(400, "Malformed JSON", "the body is not valid JSON", [
        { field: "(body)", message: "not valid JSON" },
      ]);
    }
    const parsed = schema.safeParse(raw);
    if (!parsed.success)
      throw new ProblemError(400, "Invalid Task", "the task does not match the schema", fieldErrors(parsed.error));
    const schedule = await scheduleOf(deps, parsed.data, clientId, idem);
    try {
      const r = await submitTask(deps, clientId, parsed.data, idem, schedule);
      deps.metrics?.submitted(parsed.data.type, r.replayed ? "replayed" : "accepted");
      const headers: Record<string, string> = { location: `/v1/tasks/${r.id}` };
      if (r.replayed) headers["idempotent-replayed"] = "true";
      return c.json({ id: r.id, status: r.status }, 202, headers);
    } catch (err) {
      if (err instanceof SubmitError && err.refusal) deps.metrics?.quotaRefused(err.refusal.kind);
      throw submitProblem(err);
    }
  };
}

/**
 * A fenced region (cut off from the witness, or its lease taken over) would only queue the task
 * until it is back: the client is told (503) to go to another region now.
 */
function refuseWhenFenced(deps: GatewayDeps): void {
  if (!deps.fence || deps.fence.allows()) return;
  const others = (deps.config.regions ?? []).filter((r) => r !== deps.config.REGION);
  throw new ProblemError(
    503,
    "Region Fenced",
    `region ${deps.config.REGION} does not hold its lease; submit to ${others.join(" or ") || "another region"} with the same Idempotency-Key`,
    undefined,
    {
      "retry-after": "1",
      ...(others.length ? { "x-try-regions": others.join(",") } : {}),
    },
  );
}

/**
 * `notBefore` / `needBy` checked against the clock (a 400 naming the field, nothing stored) and
 * turned into the task's start (docs/scheduling.md). Undefined: neither was given, or the
 * Idempotency-Key already made its task: a client's retry of an accepted scheduled task (its 202
 * lost in a gateway kill) comes after `notBefore` may have passed, and is answered the task it
 * created (submitTask replays it), not a 400 for a task that exists.
 */
async function scheduleOf(
  deps: GatewayDeps,
  req: TaskRequest,
  clientId: string,
  idem: string | undefined,
): Promise<SchedulePlan | undefined> {
  if (req.notBefore === undefined && req.needBy === undefined) return undefined;
  const r = planSchedule(req, deps.now().getTime(), deps.solveTimes?.p90Ms(req.type), {
    maxAheadMs: deps.config.SCHEDULE_MAX_AHEAD_MS ?? 24 * 3600_000,
    marginMs: deps.config.SCHEDULE_MARGIN_MS ?? 5000,
    defaultSolveMs: deps.config.SCHEDULE_DEFAULT_SOLVE_MS ?? 60_000,
  });
  if (r.ok) return r.plan;
  if (idem !== undefined && (await taskOfKey(deps, clientId, idem))) return undefined;
  throw new ProblemError(400, "Invalid Task", "the task's schedule is not possible", r.errors);
}

/** Whether the client's Idempotency-Key already made a task (in any region: its id's home variants). */
async function taskOfKey(deps: GatewayDeps, clientId: string, idem: string): Promise<boolean> {
  const regions = deps.config.regions ?? [deps.config.REGION];
  const id = withHomeRegion(deriveTaskId(clientId, idem), regions, deps.config.REGION);
  return (await deps.store.getMany(homeRegionVariants(id, regions))).length > 0;
}
