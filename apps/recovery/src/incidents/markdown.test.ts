import { expect, test } from "bun:test";
import { postMortem, renderIncidentList } from "./markdown.ts";
import type { Incident } from "./model.ts";

const incident: Incident = {
  id: 7,
  key: "rollback:v2-1",
  kind: "rollback",
  region: "fsn1",
  summary: "rollout v2-1 rolled back: gate failed",
  startedAt: "2026-12-06T10:00:01.000Z",
  detectedAt: "2026-12-06T10:01:05.000Z",
  recoveredAt: "2026-12-06T10:01:07.500Z",
  endedAt: "2026-12-06T10:01:07.500Z",
  open: false,
  mttrMs: 66_500,
  detectToRecoverMs: 2500,
  detectMs: 64_000,
  tasksAffected: 40,
  rpo: null,
  rtoMs: null,
  extraPaid: 3,
  extraMicros: 4350,
  detail: {},
  timeline: [{ at: "2026-12-06T10:01:05.000Z", source: "rollout_control", what: "rollback fsn1: gate failed" }],
  openedAt: "2026-12-06T10:01:06.000Z",
  updatedAt: "2026-12-06T10:01:08.000Z",
};

test("the post-mortem has the figures filled in and the sections a person writes", () => {
  const md = postMortem(incident);
  expect(md).toStartWith("# Incident 7: rollback in fsn1\n");
  expect(md).toContain("- start: 2026-12-06 10:00:01 UTC");
  expect(md).toContain("- 2026-12-06 10:01:05 [rollout_control] rollback fsn1: gate failed");
  expect(md).toContain("| tasks affected | 40 |");
  expect(md).toContain("| MTTR (start to end) | 1 min 07 s |");
  expect(md).toContain("| detection to recovery | 2.5 s |");
  expect(md).toContain("| RPO (acknowledged tasks lost or failed) | – |");
  expect(md).toContain("| extra paid submissions | 3 |");
  expect(md).toContain("| their money | $0.00435 |");
  for (const h of [
    "## Summary",
    "## Timeline (UTC)",
    "## Impact",
    "## Root cause",
    "## What went well",
    "## What to change",
  ])
    expect(md).toContain(h);
});

test("the list shows an open incident as OPEN", () => {
  const out = renderIncidentList([{ ...incident, open: true, endedAt: null, mttrMs: null }]);
  expect(out).toContain("OPEN");
  expect(out).toContain("rollback");
  expect(renderIncidentList([])).toBe("no incident recorded");
});
