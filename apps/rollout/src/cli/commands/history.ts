// `rollout history [--json]`: the rollout's decisions, each with the gate figures behind it.
import type { LogEntry } from "../../domain/plan.ts";
import { type CliContext, show } from "../context.ts";

/** The canary's and the stable version's figures of a decision, in brackets (none: ""). */
function figuresOf(f: LogEntry["figures"]): string {
  const c = f?.canary as { tasks?: number; failed?: number; p95Ms?: number | null } | undefined;
  const s = f?.stable as typeof c;
  return c && s
    ? ` [canary ${c.tasks} tasks, ${c.failed} troubled, p95 ${c.p95Ms ?? "-"} ms; stable ${s.tasks}, ${s.failed}, ${s.p95Ms ?? "-"} ms]`
    : "";
}

export async function historyCommand(ctx: CliContext): Promise<number> {
  const cur = await ctx.store.read();
  if (!cur) {
    show(ctx, [], "no rollout");
    return 0;
  }
  const r = cur.record;
  show(
    ctx,
    r.log,
    [
      `rollout ${r.id} (${r.state})`,
      ...r.log.map(
        (e) =>
          `${e.at} ${e.action}${e.region ? ` ${e.region}` : ""}${e.percent ? ` ${e.percent}%` : ""}: ${e.why}${figuresOf(e.figures)}`,
      ),
    ].join("\n"),
  );
  return 0;
}
