import { fieldErrors } from "@pipeline/shared/schemas";
import type { Context } from "hono";
import { z } from "zod";
import type { GatewayDeps } from "../../deps.ts";
import { decideReport, type ReportRefusal } from "../../domain/reports.ts";
import type { GatewayEnvVars } from "../env.ts";
import { ProblemError } from "../problem.ts";
import { ownTask } from "./own-task.ts";

/** The body of `POST /v1/tasks/:id/report`: did the site accept the answer? */
export const ReportBody = z.strictObject({ accepted: z.boolean() });
export type ReportBody = z.infer<typeof ReportBody>;

/** The provider's report window when none is configured (2Captcha: 15 minutes). */
export const DEFAULT_REPORT_WINDOW_MS = 15 * 60_000;

const REFUSED: Record<Exclude<ReportRefusal, "not_found">, [string, string]> = {
  not_solved: ["Task Not Solved", "only a completed task, solved by the provider, can be reported"],
  window_closed: ["Report Window Closed", "the provider takes reports only within REPORT_WINDOW_MS of the answer"],
};

/**
 * `POST /v1/tasks/:id/report`: the client's verdict on its own solved task, stored once for a
 * solver to forward to the provider (202). Another client's task is 404; a second report 409.
 */
export function reportRoute(deps: GatewayDeps) {
  return async (c: Context<GatewayEnvVars, "/:id/report">) => {
    const clientId = c.get("clientId");
    const row = await ownTask(deps, clientId, c.req.param("id"));
    let raw: unknown;
    try {
      raw = await c.req.json();
    } catch {
      throw new ProblemError(400, "Malformed JSON", "the body is not valid JSON", [
        { field: "(body)", message: "not valid JSON" },
      ]);
    }
    const body = ReportBody.safeParse(raw);
    if (!body.success) throw new ProblemError(400, "Invalid Report", undefined, fieldErrors(body.error));
    const windowMs = deps.config.REPORT_WINDOW_MS ?? DEFAULT_REPORT_WINDOW_MS;
    const d = decideReport(row, clientId, body.data.accepted, deps.now(), windowMs);
    if (!d.ok) {
      if (d.refusal === "not_found") throw new ProblemError(404, "Task Not Found");
      const [title, detail] = REFUSED[d.refusal];
      throw new ProblemError(409, title, detail);
    }
    if (!deps.reports) throw new ProblemError(503, "Reports Unavailable", "reports are not taken here");
    if ((await deps.reports.insert(d.report)) === "duplicate")
      throw new ProblemError(409, "Already Reported", "this task has been reported already; a task is reported once");
    deps.metrics?.reported(d.report.taskType, body.data.accepted);
    return c.json({ id: row.id, accepted: body.data.accepted, status: "pending" }, 202);
  };
}
