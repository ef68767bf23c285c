import type { GatewayDeps } from "../../deps.ts";
import { decideReport } from "../../domain/reports.ts";
import { bare, code, type ProtocolReply } from "../../domain/twocaptcha/reply.ts";
import { DEFAULT_REPORT_WINDOW_MS } from "../v1/report.ts";

/**
 * `res.php?action=reportbad|reportgood`: the client's verdict on its own solved task, stored once
 * for a solver to forward to the provider, answered in the protocol's codes: OK_REPORT_RECORDED;
 * ERROR_DUPLICATE_REPORT for a task reported already; ERROR_REPORT_NOT_RECORDED past the window;
 * ERROR_WRONG_CAPTCHA_ID for a task that is not the caller's or that no provider solved.
 */
export async function facadeReport(
  deps: GatewayDeps,
  clientId: string,
  taskId: string,
  accepted: boolean,
): Promise<ProtocolReply> {
  const row = await deps.store.get(taskId);
  const windowMs = deps.config.REPORT_WINDOW_MS ?? DEFAULT_REPORT_WINDOW_MS;
  const d = decideReport(row, clientId, accepted, deps.now(), windowMs);
  if (!d.ok) return code(d.refusal === "window_closed" ? "ERROR_REPORT_NOT_RECORDED" : "ERROR_WRONG_CAPTCHA_ID");
  if (!deps.reports) return code("ERROR_REPORT_NOT_RECORDED");
  if ((await deps.reports.insert(d.report)) === "duplicate") return code("ERROR_DUPLICATE_REPORT");
  deps.metrics?.reported(d.report.taskType, accepted);
  return bare("OK_REPORT_RECORDED");
}
