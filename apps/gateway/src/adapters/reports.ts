import type { Db } from "@pipeline/shared/db";
import { sql } from "drizzle-orm";
import type { NewReport } from "../domain/reports.ts";

export interface ReportStore {
  /**
   * Stores the task's one report, `pending` for a solver to forward: `recorded`, or `duplicate`
   * when the task has one already (the first stands; nothing changes).
   */
  insert(r: NewReport): Promise<"recorded" | "duplicate">;
}

/** Reports in Postgres (`task_reports`, one row per task: the primary key makes "at most once"). */
export function createReportStore(db: Db): ReportStore {
  return {
    async insert(r) {
      // Its own columns only (the gateway may insert no others: a drizzle insert names every column).
      const rows = await db.execute(sql`
        insert into task_reports (task_id, owner, accepted, task_type, sitekey, region, provider_task_id, provider_key_ref)
        values (${r.taskId}, ${r.owner}, ${r.accepted}, ${r.taskType}, ${r.sitekey}, ${r.region}, ${r.providerTaskId}, ${r.providerKeyRef})
        on conflict (task_id) do nothing returning task_id`);
      return rows.length === 1 ? "recorded" : "duplicate";
    },
  };
}
