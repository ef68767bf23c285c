// EVENTS sized against the snapshots (assess/events-sizing.ts) as the service's gauges, which
// promtool accepts.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { findPromtool } from "@pipeline/devstack";
import { type EventsFigures, eventsSizing } from "../assess/events-sizing.ts";
import { createRecoveryMetrics } from "./registry.ts";

const now = Date.parse("2026-12-04T10:00:00Z");
const HOUR = 3600_000;
const DAY = 24 * HOUR;
// 1 GiB max, 7 days max age; 100 MB held over the last hour (100 MB/h).
const events = (o: Partial<EventsFigures> = {}): EventsFigures => ({
  stream: "EVENTS_T",
  bytes: 100e6,
  messages: 100_000,
  firstSeq: 1,
  lastSeq: 100_000,
  firstAt: now - HOUR,
  maxBytes: 1024 ** 3,
  maxMessages: -1,
  maxAgeMs: 7 * DAY,
  ...o,
});
const snapshots = { now, snapshotIntervalMs: 5 * 60_000, snapshotMaxAgeMs: 15 * 60_000 };

test("the service's /metrics carries the EVENTS figures, and promtool accepts them", async () => {
  const s = eventsSizing({ ...snapshots, events: events(), snapshot: { lastSeq: 99_000, at: now - 60_000 } });
  const text = await (await createRecoveryMetrics({ events: async () => s }).response()).text();
  expect(text).toContain('recovery_events_bytes{stream="EVENTS_T",app="recovery"} 100000000');
  expect(text).toContain(`recovery_events_max_bytes{stream="EVENTS_T",app="recovery"} ${1024 ** 3}`);
  expect(text).toContain('recovery_events_needed_seconds{stream="EVENTS_T",app="recovery"} 900');
  expect(text).toContain('recovery_snapshot_events_seq{stream="EVENTS_T",app="recovery"} 99000');
  expect(text).toContain('recovery_events_oldest_age_seconds{stream="EVENTS_T",app="recovery"} 3600');
  // No max_msgs set: no such series (the alert's ratio then has nothing to divide).
  expect(text).not.toContain("recovery_events_max_messages{");
  const r = spawnSync(findPromtool(), ["check", "metrics"], { input: text, encoding: "utf8" });
  expect(`${r.stdout}${r.stderr}`).not.toMatch(/error/i);
  expect(r.status).toBe(0);
}, 60_000);
