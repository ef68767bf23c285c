// Failover adoption: after this region took another region's lease over (lease-keeper.ts), its
// unfinished tasks, as replicated here, become this region's. Each row's home moves here (so the
// other region's solvers no longer claim it once they hear of it), an `adopted` event says so (it
// replicates back when the link heals), and the task is queued in this region's TASKS. A task
// whose provider id reached this region is resumed by polling it, not submitted again.
import type { JetStreamClient } from "@nats-io/jetstream";
import type { GroupOf } from "@pipeline/shared/fair-share";
import type { Logger } from "@pipeline/shared/log";
import { publishWithRetry } from "@pipeline/shared/nats";
import type { TaskEvent } from "@pipeline/shared/schemas";
import { eventSubject } from "@pipeline/shared/subjects";
import type postgres from "postgres";
import { republishTask } from "../adapters/tasks-stream.ts";

export interface AdoptDeps {
  sql: postgres.Sql;
  js: JetStreamClient;
  local: string;
  log: Logger;
  publishDeadlineMs: number;
  /** This region's fair-share groups: an adopted task goes on its owner's group's subjects here. */
  groupOf?: GroupOf;
}

export interface AdoptReport {
  remote: string;
  phase: "resumable" | "all";
  epoch: number;
  adopted: number;
  withProviderId: number;
  ms: number;
}

/**
 * `phase`: "resumable" adopts only tasks whose provider id reached this region (resuming them
 * costs nothing, whatever the other region still does); "all" adopts the rest too. A task
 * without a known provider id may have been submitted by the other region in the seconds before
 * it fenced itself, its checkpoint stuck behind the cut: the keeper adopts those only after
 * ADOPT_UNCERTAIN_MS, by when a healed link has brought the checkpoint (docs/regions.md).
 */
export async function adoptRegion(
  d: AdoptDeps,
  remote: string,
  epoch: number,
  phase: "resumable" | "all" = "all",
): Promise<AdoptReport> {
  const started = Date.now();
  const rows = await d.sql<
    {
      id: string;
      type: string;
      priority: string;
      owner: string;
      state: TaskEvent["state"];
      version: number;
      provider_id: string | null;
    }[]
  >`
    select id, type, priority, owner, state, version, provider_id from tasks
    where region = ${remote} and state in ('queued', 'retrying', 'solving') and (${phase} = 'all' or provider_id is not null)
    order by case priority when 'high' then 0 when 'normal' then 1 else 2 end, created_at`;
  const at = new Date().toISOString();
  // Per task, in an order a crash can resume from (a rerun picks the rows still homed there):
  // the event first (idempotent by its message id), then the row's home, then the message. A
  // crash after the row moved and before the message is a stale row the sweep re-publishes.
  for (const r of rows) {
    const ev: TaskEvent = {
      taskId: r.id,
      kind: "adopted",
      state: r.state,
      version: r.version,
      region: d.local,
      at,
      data: { from: remote, epoch },
    };
    await publishWithRetry(
      d.js,
      eventSubject(d.local, "adopted"),
      JSON.stringify(ev),
      `adopted:${r.id}:${epoch}`,
      d.publishDeadlineMs,
    );
    const moved =
      await d.sql`update tasks set region = ${d.local}, lease_owner = null, lease_until = null, updated_at = now() where id = ${r.id} and region = ${remote}`;
    if (moved.count === 1) await republishTask(d.js, d.local, r, "adopt", d.publishDeadlineMs, d.groupOf);
  }
  const report = {
    remote,
    epoch,
    phase,
    adopted: rows.length,
    withProviderId: rows.filter((r) => r.provider_id).length,
    ms: Date.now() - started,
  };
  d.log.warn(report, "adopted another region's unfinished tasks");
  return report;
}
