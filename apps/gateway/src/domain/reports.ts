// Whether a client's report on a task may go to the provider: pure, over the task's row.

/** What a report reads of a task's row (a `TaskRow` is one). */
export interface ReportedTask {
  id: string;
  owner: string;
  type: string;
  region: string;
  params: unknown;
  state: string;
  providerId: string | null;
  providerKeyRef: string | null;
  completedAt: Date | null;
}

/** What the gateway stores for a report a solver will forward. */
export interface NewReport {
  taskId: string;
  owner: string;
  accepted: boolean;
  taskType: string;
  sitekey: string | null;
  region: string;
  providerTaskId: string;
  providerKeyRef: string;
}

/** Why a report is refused: no such task of this client, not solved by a provider, or too late. */
export type ReportRefusal = "not_found" | "not_solved" | "window_closed";

/** The site key of a task's page, for acceptance rates per site (none for images). */
export function sitekeyOf(params: unknown): string | null {
  if (!params || typeof params !== "object") return null;
  const p = params as Record<string, unknown>;
  const key = p.sitekey ?? p.googlekey ?? p.gt;
  return typeof key === "string" && key.length <= 200 ? key : null;
}

/**
 * The report to store for `row`, or why not: only the caller's own task (another client's is
 * `not_found`, as every read answers it), only a task a provider solved (completed, with its
 * provider task and key), and only within `windowMs` of its completion (the provider's window).
 */
export function decideReport(
  row: ReportedTask | undefined,
  clientId: string,
  accepted: boolean,
  now: Date,
  windowMs: number,
): { ok: true; report: NewReport } | { ok: false; refusal: ReportRefusal } {
  if (!row || row.owner !== clientId) return { ok: false, refusal: "not_found" };
  if (row.state !== "completed" || !row.providerId || !row.providerKeyRef || !row.completedAt)
    return { ok: false, refusal: "not_solved" };
  if (now.getTime() - row.completedAt.getTime() > windowMs) return { ok: false, refusal: "window_closed" };
  return {
    ok: true,
    report: {
      taskId: row.id,
      owner: row.owner,
      accepted,
      taskType: row.type,
      sitekey: sitekeyOf(row.params),
      region: row.region,
      providerTaskId: row.providerId,
      providerKeyRef: row.providerKeyRef,
    },
  };
}
