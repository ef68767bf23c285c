// A bulk action's filter: the task explorer's filters (explorer/task-query.ts, the same parser and
// the same error naming the field), then the action's rules. Redrive: failed tasks only. Cancel:
// one client's unfinished tasks (queued, retrying, solving: what the gateway's cancel takes).
// Both: tasks homed in this region only (a task is redriven or cancelled by its home region). Time
// bounds given as a duration (`7d`) are fixed at the preview, so the confirm acts on the same range.
import { CANCELLABLE_STATES } from "@pipeline/shared/tasks";
import { z } from "zod";
import { parseTaskListQuery, resolveBound, type TaskListQuery } from "../explorer/task-query.ts";

export const BulkAction = z.enum(["redrive", "cancel"]);
export type BulkAction = z.infer<typeof BulkAction>;

/** The normalized filter a preview's token binds: the region set, time bounds as ISO date-times. */
export const BulkFilter = z
  .object({
    state: z.enum(["queued", "solving", "retrying", "completed", "failed", "cancelled"]).optional(),
    client: z.string().optional(),
    type: z.string().optional(),
    priority: z.string().optional(),
    region: z.string(),
    solverVersion: z.string().optional(),
    from: z.string().optional(),
    to: z.string().optional(),
    search: z.string().optional(),
  })
  .strict();
export type BulkFilter = z.infer<typeof BulkFilter>;

export type FilterResult = { ok: true; filter: BulkFilter } | { ok: false; error: string; fields: string[] };

const refuse = (field: string, message: string): FilterResult => ({
  ok: false,
  error: `${field}: ${message}`,
  fields: [field],
});

/** The action's rules on a parsed query: a refusal names its field. */
function actionRules(action: BulkAction, q: TaskListQuery, region: string): FilterResult | undefined {
  if (q.region && q.region !== region)
    return refuse(
      "region",
      `tasks of region ${q.region} are ${action === "redrive" ? "redriven" : "cancelled"} from that region's console or CLI; this is region ${region}`,
    );
  if (action === "redrive" && q.state && q.state !== "failed")
    return refuse("state", "a bulk redrive takes failed (dead-lettered) tasks only");
  if (action === "cancel") {
    if (!q.client) return refuse("client", "a bulk cancel needs a client (the owner of the tasks)");
    if (q.state && !(CANCELLABLE_STATES as readonly string[]).includes(q.state))
      return refuse("state", `a bulk cancel takes unfinished tasks only (${CANCELLABLE_STATES.join(", ")})`);
  }
  return undefined;
}

/**
 * Parses an explorer filter for `action` in `region`: unknown fields and the explorer's page
 * options (`limit`, `after`) refused, naming them; durations resolved against `now`.
 */
export function parseBulkFilter(
  action: BulkAction,
  input: Record<string, unknown>,
  region: string,
  now = Date.now(),
): FilterResult {
  for (const f of ["limit", "after"])
    if (input[f] !== undefined && input[f] !== "")
      return refuse(f, "a bulk action takes every matching task (at most CONSOLE_BULK_MAX), not a page");
  const parsed = parseTaskListQuery(input);
  if (!parsed.ok) return parsed;
  const q = parsed.query;
  const refused = actionRules(action, q, region);
  if (refused) return refused;
  const filter: BulkFilter = {
    ...(action === "redrive" ? { state: "failed" } : q.state ? { state: q.state } : {}),
    ...(q.client ? { client: q.client } : {}),
    ...(q.type ? { type: q.type } : {}),
    ...(q.priority ? { priority: q.priority } : {}),
    region,
    ...(q.solverVersion ? { solverVersion: q.solverVersion } : {}),
    ...(q.from ? { from: resolveBound(q.from, now).toISOString() } : {}),
    ...(q.to ? { to: resolveBound(q.to, now).toISOString() } : {}),
    ...(q.search ? { search: q.search } : {}),
  };
  return { ok: true, filter };
}

/** The states an action walks: failed for a redrive; the filter's state, or every unfinished one, for a cancel. */
export function statesOf(action: BulkAction, filter: BulkFilter): string[] {
  if (action === "redrive") return ["failed"];
  return filter.state ? [filter.state] : [...CANCELLABLE_STATES];
}

/** The explorer's query of one of those states (its page options unused). */
export function queryOf(filter: BulkFilter, state: string): TaskListQuery {
  return { ...filter, state: state as TaskListQuery["state"], limit: 50 } as TaskListQuery;
}

/** The filter in a line (`state=failed client=acme region=fsn1`). */
export function describeFilter(filter: BulkFilter): string {
  return Object.entries(filter)
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
}
