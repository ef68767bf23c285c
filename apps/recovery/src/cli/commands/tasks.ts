// `recovery tasks`: the console's task explorer on the command line (the same query module).
import { openDatabase } from "@pipeline/shared/db";
import { UsageError } from "../../context.ts";
import { listTasks, parseTaskListQuery, type TaskListPage } from "../../explorer/task-query.ts";
import type { CommandOf } from "../args.ts";
import { type CliEnv, print } from "../env.ts";
import { filterInputOf, filterUsageError } from "./task-filter.ts";

/** A page as a table for people; `next` says how to go on. */
export function renderTasks(page: TaskListPage): string {
  if (page.rows.length === 0) return "no task matches";
  const lines = page.rows.map((r) =>
    [
      r.createdAt.replace("T", " ").slice(0, 19),
      r.id,
      r.state.padEnd(9),
      r.client.padEnd(12),
      r.type.padEnd(12),
      r.priority.padEnd(6),
      r.region.padEnd(6),
      (r.solverVersion ?? "-").padEnd(8),
      r.pageurl ?? r.sitekey ?? (r.idempotencyKey ? `key ${r.idempotencyKey}` : "-"),
    ].join("  "),
  );
  return [...lines, page.next ? `more: --after ${page.next}` : `${page.rows.length} shown, no more`].join("\n");
}

export async function tasksCommand(cmd: CommandOf<"tasks">, { config }: CliEnv): Promise<number> {
  const parsed = parseTaskListQuery({ ...filterInputOf(cmd), limit: cmd.limit, after: cmd.after });
  if (!parsed.ok) throw filterUsageError(parsed.error);
  if (!config.DATABASE_URL) throw new UsageError("DATABASE_URL is required for tasks");
  const database = openDatabase(config.DATABASE_URL, { max: 1, appName: "recovery-tasks" });
  try {
    const page = await listTasks(database.sql, parsed.query);
    print(cmd.json, page, renderTasks(page));
    return 0;
  } finally {
    await database.close();
  }
}
