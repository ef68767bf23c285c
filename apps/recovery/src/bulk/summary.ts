// What a bulk action says, in one line: the preview's question and the outcome's answer.
import type { BulkAction } from "./filter.ts";

const PAST: Record<BulkAction, string> = { redrive: "redriven", cancel: "cancelled" };

/** Why a task of the set was not acted on, in the words the outcome groups them by. */
export const REFUSAL_TEXT: Record<string, string> = {
  not_found: "gone (deleted by retention)",
  purged: "params erased by retention",
  other_region: "homed in another region",
  not_failed: "state changed meanwhile (no longer failed)",
  not_cancellable: "state changed meanwhile (already finished)",
  queue_unavailable: "the queue did not take it (still failed; try again)",
  error: "an error (see the recovery log)",
};

export interface BulkPreview {
  action: BulkAction;
  count: number;
  limit: number;
}

export interface BulkOutcome extends BulkPreview {
  /** The count the token was issued for (undefined from the CLI, which previews and runs at once). */
  previewed?: number | undefined;
  /** Tasks matching when the confirm ran (`count`), how many it took on (at most `limit`), and how many it changed. */
  attempted: number;
  done: number;
  /** Refusals by code (REFUSAL_TEXT). */
  refused: Record<string, number>;
}

const n = (x: number) => x.toLocaleString("en-US");

/** "412 tasks match; redrive them?"; above the limit, how many one confirm takes. */
export function previewLine(p: BulkPreview): string {
  if (p.count === 0) return `no task matches; nothing to ${p.action}`;
  const tasks = `${n(p.count)} task${p.count === 1 ? "" : "s"} match${p.count === 1 ? "es" : ""}`;
  if (p.count <= p.limit) return `${tasks}; ${p.action} ${p.count === 1 ? "it" : "them"}?`;
  return `${tasks}, over the limit of ${n(p.limit)} per operation (CONSOLE_BULK_MAX); ${p.action} the oldest ${n(p.limit)}?`;
}

/** "redriven 412 of 412; 0 refused", the refusals grouped, a changed count and what is left named. */
export function outcomeLine(o: BulkOutcome): string {
  const refusedTotal = Object.values(o.refused).reduce((a, b) => a + b, 0);
  const groups = Object.entries(o.refused)
    .filter(([, k]) => k > 0)
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([code, k]) => `${n(k)} ${REFUSAL_TEXT[code] ?? code}`);
  const parts = [
    `${PAST[o.action]} ${n(o.done)} of ${n(o.attempted)}; ${n(refusedTotal)} refused${groups.length ? ` (${groups.join(", ")})` : ""}`,
  ];
  if (o.previewed !== undefined && o.previewed !== o.count)
    parts.push(`previewed ${n(o.previewed)}, now ${n(o.count)}`);
  if (o.count > o.attempted)
    parts.push(
      `${n(o.count - o.attempted)} more match beyond the limit of ${n(o.limit)} (CONSOLE_BULK_MAX): run it again`,
    );
  return parts.join("; ");
}
