// An incident as text (pure; markdown.test.ts): the CLI's list and the post-mortem skeleton of
// `recovery incident <id> --markdown`, with the figures filled in and the sections a person writes
// left as prompts.
import { fmtDuration, fmtMicros, fmtTime, type Incident } from "./model.ts";

const num = (n: number | null) => (n === null ? "–" : String(n));

/** One line per incident, newest first, for `recovery incidents`. */
export function renderIncidentList(rows: Incident[]): string {
  if (rows.length === 0) return "no incident recorded";
  return rows
    .map((i) =>
      [
        String(i.id).padStart(5),
        fmtTime(i.startedAt),
        i.kind.padEnd(8),
        i.region.padEnd(8),
        (i.open ? "OPEN" : "closed").padEnd(6),
        `MTTR ${fmtDuration(i.mttrMs)}`.padEnd(16),
        i.summary,
      ].join("  "),
    )
    .join("\n");
}

/** The impact figures as (label, value) pairs: the console's page and the markdown show the same. */
export function impactFigures(i: Incident): Array<[string, string]> {
  return [
    ["tasks affected", num(i.tasksAffected)],
    ["RPO (acknowledged tasks lost or failed)", num(i.rpo)],
    ["RTO", fmtDuration(i.rtoMs)],
    ["MTTR (start to end)", i.open ? "open" : fmtDuration(i.mttrMs)],
    ["detection to recovery", fmtDuration(i.detectToRecoverMs)],
    ["start to detection", fmtDuration(i.detectMs)],
    ["extra paid submissions", num(i.extraPaid)],
    ["their money", fmtMicros(i.extraMicros)],
  ];
}

/** The post-mortem skeleton: summary, timeline, impact; root cause and lessons for a person to write. */
export function postMortem(i: Incident): string {
  const times: Array<[string, string | null]> = [
    ["start", i.startedAt],
    ["detection", i.detectedAt],
    ["recovery", i.recoveredAt],
    ["end", i.endedAt],
  ];
  return [
    `# Incident ${i.id}: ${i.kind} in ${i.region}`,
    "",
    "## Summary",
    "",
    i.summary,
    "",
    `- kind: ${i.kind}; region: ${i.region}; ${i.open ? "**still open**" : "closed"}; key \`${i.key}\``,
    ...times.map(([label, at]) => `- ${label}: ${at ? `${fmtTime(at)} UTC` : "–"}`),
    "",
    "## Timeline (UTC)",
    "",
    ...(i.timeline.length
      ? i.timeline.map((e) => `- ${fmtTime(e.at)} [${e.source}] ${e.what}`)
      : ["- (no event recorded)"]),
    "",
    "## Impact",
    "",
    "| figure | value |",
    "|---|---|",
    ...impactFigures(i).map(([a, b]) => `| ${a} | ${b} |`),
    "",
    "## Root cause",
    "",
    "_To be written: what failed, and why it could._",
    "",
    "## What went well",
    "",
    "_To be written._",
    "",
    "## What to change",
    "",
    "_To be written: each change with an owner._",
    "",
  ].join("\n");
}
