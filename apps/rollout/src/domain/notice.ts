// What a person is told when a rollout needs them or ends, pure (notice.test.ts): the notification
// a record's state calls for (rolled back, waiting for promotion, inconclusive, promoted, aborted),
// keyed so that each event has its own key (`rollout:<id>:<kind>:<region>.<step>.<stepStartedAt>`:
// a step left inconclusive twice, after a resume, is two events). The controller hands it to its
// `notify` hook once and keeps the key in the record's `notified` list.
import { percentAt, type Rollout } from "@pipeline/shared/rollout";

export type NoticeKind = "rollback" | "awaiting_promotion" | "inconclusive" | "promoted" | "aborted";

export interface Notice {
  key: string;
  kind: NoticeKind;
  title: string;
  text: string;
}

function kindOf(r: Rollout): NoticeKind | undefined {
  if (r.state === "rolledBack") return "rollback";
  if (r.state === "promoted") return "promoted";
  if (r.state === "aborted") return "aborted";
  if (r.state === "paused" && r.awaiting === "promotion") return "awaiting_promotion";
  if (r.state === "paused" && r.awaiting === "decision") return "inconclusive";
  return undefined;
}

/** `canary 12 tasks, 0 failed, p95 800 ms; stable 40, 1, 750 ms` from a log entry's figures, or "". */
export function figuresText(f: Record<string, unknown> | undefined): string {
  type F = { tasks?: number; failed?: number; p95Ms?: number | null };
  const c = f?.canary as F | undefined;
  const s = f?.stable as F | undefined;
  if (!c || !s) return "";
  return `canary ${c.tasks} tasks, ${c.failed} failed, p95 ${c.p95Ms ?? "-"} ms; stable ${s.tasks}, ${s.failed}, ${s.p95Ms ?? "-"} ms`;
}

const TITLES: Record<NoticeKind, string> = {
  rollback: "rolled back",
  awaiting_promotion: "waits for promotion",
  inconclusive: "paused: inconclusive",
  promoted: "promoted",
  aborted: "aborted",
};

/** The notification `r`'s state calls for, or undefined (running, or paused by a person). */
export function noticeOf(r: Rollout): Notice | undefined {
  const kind = kindOf(r);
  if (!kind) return undefined;
  const region = r.plan.regions[r.region] ?? "?";
  const where = kind === "promoted" ? r.plan.regions.join(", ") : `${region} at ${percentAt(r.plan.steps, r.step)}%`;
  const figures = figuresText([...r.log].reverse().find((e) => e.figures)?.figures);
  const next =
    kind === "awaiting_promotion"
      ? "`npm run rollout -- promote` or the console's Promote goes on; abort ends it."
      : kind === "inconclusive"
        ? "resume judges the step again with a new deadline; promote or abort decide it."
        : "";
  return {
    key: `rollout:${r.id}:${kind}:${region}.${r.step}.${r.stepStartedAt}`,
    kind,
    title: `Rollout ${r.id} (${r.plan.version} replacing ${r.plan.stable}) ${TITLES[kind]} in ${where}`,
    text: [r.reason ?? "", figures ? `last gate: ${figures}` : "", next].filter(Boolean).join("\n"),
  };
}
