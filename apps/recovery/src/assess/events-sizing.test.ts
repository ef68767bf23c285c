// EVENTS sized against the snapshots (docs/runbook.md, "Sizing EVENTS"): the window each limit
// holds at the measured rate, against what a restore may need; gone events after the newest
// snapshot fail. The same figures as the service's gauges: metrics/events-gauges.test.ts.
import { expect, test } from "bun:test";
import { type EventsFigures, eventsCheck, eventsSizing } from "./events-sizing.ts";

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

test("limits that hold more than a restore needs at the measured rate: ok, with the window they hold", () => {
  const s = eventsSizing({ ...snapshots, events: events(), snapshot: { lastSeq: 99_000, at: now - 60_000 } });
  expect(s.level).toBe("ok");
  expect(s.needMs).toBe(15 * 60_000);
  // 1 GiB at 100 MB/h: about 10.7 h (max_age, 7 days, does not bind).
  expect(s.holdsMs / HOUR).toBeCloseTo(10.74, 1);
  expect(s.bytesRatio).toBeCloseTo(0.093, 2);
  expect(eventsCheck(s)).toMatchObject({ name: "events", level: "ok" });
});

test("limits that cannot hold SNAPSHOT_MAX_AGE_MS at the measured rate warn; so does a stream over 80% of a limit", () => {
  // 10 MB max_bytes at 100 MB/h: 6 min held, 15 min needed.
  const small = eventsSizing({ ...snapshots, events: events({ bytes: 9e6, firstAt: now - 324_000, maxBytes: 10e6 }) });
  expect(small.level).toBe("warn");
  expect(small.holdsMs).toBeLessThan(small.needMs);
  expect(eventsCheck(small).hint).toContain("Sizing EVENTS");
  const full = eventsSizing({ ...snapshots, events: events({ messages: 85_000, maxMessages: 100_000 }) });
  expect(full.level).toBe("warn");
  // A max_age shorter than the need warns without any traffic.
  expect(
    eventsSizing({ ...snapshots, events: events({ bytes: 0, messages: 0, firstAt: null, maxAgeMs: 10 * 60_000 }) })
      .level,
  ).toBe("warn");
  // A young stream: the rate is not judged (a minute of history says little).
  expect(
    eventsSizing({ ...snapshots, events: events({ bytes: 9e6, firstAt: now - 30_000, maxBytes: 100e6 }) }).level,
  ).toBe("ok");
});

test("events after the newest snapshot already gone: fail (a restore from it would refuse)", () => {
  const s = eventsSizing({
    ...snapshots,
    events: events({ firstSeq: 5000 }),
    snapshot: { lastSeq: 4000, at: now - 600_000 },
  });
  expect(s.lostAfterSnapshot).toBe(true);
  expect(s.level).toBe("fail");
  expect(s.summary).toContain("seq 4001..4999");
  // Exactly the next event held: nothing lost.
  expect(
    eventsSizing({ ...snapshots, events: events({ firstSeq: 4001 }), snapshot: { lastSeq: 4000, at: now } })
      .lostAfterSnapshot,
  ).toBe(false);
});
