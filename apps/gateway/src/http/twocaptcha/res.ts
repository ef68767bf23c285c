import type { TaskView } from "@pipeline/shared/schemas";
import { HomeUnreachableError } from "../../adapters/home-tokens.ts";
import type { GatewayDeps } from "../../deps.ts";
import { toTaskView } from "../../domain/task-view.ts";
import { bare, code } from "../../domain/twocaptcha/reply.ts";
import { FACADE_BALANCE, parseResRequest } from "../../domain/twocaptcha/res-request.ts";
import { bulkGetReply, get2Reply, getReply } from "../../domain/twocaptcha/task-answer.ts";
import type { ProtocolAction } from "./protocol.ts";
import { facadeReport } from "./report.ts";

/** `res.php`: answers, the balance, and reports, for the calling key's own tasks only. */
export function resAction(deps: GatewayDeps): ProtocolAction {
  /** The caller's view of a task, or undefined when it does not exist or belongs to another key. */
  const reads = deps.results ?? deps.store;
  const viewOf = async (id: string, clientId: string): Promise<TaskView | undefined> => {
    try {
      const row = await reads.get(id);
      return row?.owner === clientId ? toTaskView(row, deps.now()) : undefined;
    } catch (err) {
      // Its result is held by its home region, which does not answer right now: not ready yet.
      if (!(err instanceof HomeUnreachableError) || err.row.owner !== clientId) throw err;
      return { ...toTaskView(err.row, deps.now()), status: "solving", error: undefined };
    }
  };
  return async (call, clientId, c) => {
    const parsed = parseResRequest(call.params);
    if (!parsed.ok) return code(parsed.code);
    const r = parsed.request;
    switch (r.action) {
      case "getbalance":
        return bare(FACADE_BALANCE);
      case "get":
        if (!r.bulk) return getReply(await viewOf(r.ids[0]!, clientId));
        {
          // One query for all the ids (up to 100), not one each.
          const rows = new Map((await reads.getMany(r.ids)).map((row) => [row.id, row]));
          return bulkGetReply(
            r.ids.map((id) => {
              const row = rows.get(id);
              return row?.owner === clientId ? toTaskView(row, deps.now()) : undefined;
            }),
          );
        }
      case "get2":
        return get2Reply(await viewOf(r.id, clientId));
      case "reportbad":
      case "reportgood": {
        const reply = await facadeReport(deps, clientId, r.id, r.action === "reportgood");
        deps.log.info(
          { requestId: c.get("requestId"), taskId: r.id, report: r.action === "reportbad" ? "bad" : "good" },
          reply.kind === "bare" ? "facade report recorded" : "facade report refused",
        );
        return reply;
      }
    }
  };
}
