import { expect, test } from "bun:test";
import type { Incident } from "../incidents/model.ts";
import { INCIDENTS_PANEL, renderIncidentPage, renderIncidentRows } from "./incidents-page.ts";

const incident: Incident = {
  id: 4,
  key: "breaker:key_<b>:9",
  kind: "breaker",
  region: "fsn1",
  summary: `provider account <script>alert(1)</script>: breaker open`,
  startedAt: "2026-12-06T10:00:00.000Z",
  detectedAt: "2026-12-06T10:01:00.000Z",
  recoveredAt: null,
  endedAt: null,
  open: true,
  mttrMs: null,
  detectToRecoverMs: null,
  detectMs: 60_000,
  tasksAffected: null,
  rpo: null,
  rtoMs: null,
  extraPaid: null,
  extraMicros: null,
  detail: {},
  timeline: [{ at: "2026-12-06T10:00:00.000Z", source: "EVENTS", what: `breaker of key_<b> open at "w1"` }],
  openedAt: "2026-12-06T10:01:00.000Z",
  updatedAt: "2026-12-06T10:01:00.000Z",
};

test("an open incident reads open, its duration so far instead of an MTTR; text from the sources is escaped", () => {
  const rows = renderIncidentRows([incident]);
  expect(rows).toContain(`data-figure="incident.4.state">open<`);
  expect(rows).toMatch(/data-figure="incident\.4\.mttr">open for /);
  expect(rows).not.toContain("<script>");
  const page = renderIncidentPage(incident);
  expect(page).not.toContain("<script");
  expect(page).not.toContain("key_<b>");
  expect(page).toContain(`data-figure="incident.MTTR-start-to-end">open<`);
  expect(page).toContain(`data-figure="incident.end">–<`);
});

test("no incident: the table says so; the panel loads its rows with a script of the console's own", () => {
  expect(renderIncidentRows([])).toContain("no incident recorded");
  expect(INCIDENTS_PANEL).toContain(`<script src="/console/incidents.js" defer></script>`);
  expect(INCIDENTS_PANEL).not.toMatch(/<script>|on[a-z]+=/);
});
