// EVENTS against the snapshot interval (docs/runbook.md, "Sizing EVENTS"): a restore replays the
// events after the newest snapshot, so EVENTS must still hold them. Its limits (max_age, max_bytes,
// max_msgs) each bound the window it keeps; at the rate measured over what it holds now, the
// smallest of them must cover what a restore may need: SNAPSHOT_MAX_AGE_MS (how old the newest
// snapshot may get before assess fails) and two intervals. `assess` (line `events`), the service's
// start (a warning) and its `/metrics` gauges read the same figures. Pure but for the probe.
import type { JetStreamManager } from "@nats-io/jetstream";
import { streams } from "@pipeline/shared/subjects";
import { listSnapshots } from "../snapshot/manifest.ts";
import type { Check } from "./model.ts";

export interface EventsFigures {
  /** The stream's name (EVENTS_<REGION>): the gauges' `stream` label. */
  stream: string;
  bytes: number;
  messages: number;
  firstSeq: number;
  lastSeq: number;
  /** Time of the oldest message held (ms), null when empty. */
  firstAt: number | null;
  /** Limits; 0 or less = none. */
  maxBytes: number;
  maxMessages: number;
  maxAgeMs: number;
}

export interface SizingInput {
  events: EventsFigures;
  now: number;
  snapshotIntervalMs: number;
  snapshotMaxAgeMs: number;
  /** The newest snapshot's EVENTS sequence and time, when there is one. */
  snapshot?: { lastSeq: number; at: number };
}

export interface EventsSizing {
  events: EventsFigures;
  /** The newest snapshot's EVENTS sequence (null: no snapshot). */
  snapshotSeq: number | null;
  bytesRatio: number | null;
  messagesRatio: number | null;
  oldestAgeMs: number | null;
  /** How long a window the limits hold at the measured rate (Infinity: no limit binds). */
  holdsMs: number;
  /** What a restore may need: max(SNAPSHOT_MAX_AGE_MS, 2 x SNAPSHOT_INTERVAL_MS). */
  needMs: number;
  /** Events after the newest snapshot are already gone: a restore from it would refuse (ReplayGapError). */
  lostAfterSnapshot: boolean;
  level: "ok" | "warn" | "fail";
  summary: string;
}

/** Below this much history the measured rate means little: only max_age is judged. */
const MIN_SAMPLE_MS = 60_000;

const human = (ms: number) =>
  ms === Number.POSITIVE_INFINITY
    ? "unbounded"
    : ms >= 2 * 3600_000
      ? `${Math.round(ms / 360_000) / 10} h`
      : ms >= 120_000
        ? `${Math.round(ms / 60_000)} min`
        : `${Math.round(ms / 1000)} s`;

export function eventsSizing(i: SizingInput): EventsSizing {
  const e = i.events;
  const oldestAgeMs = e.firstAt === null ? null : Math.max(0, i.now - e.firstAt);
  const bytesRatio = e.maxBytes > 0 ? e.bytes / e.maxBytes : null;
  const messagesRatio = e.maxMessages > 0 ? e.messages / e.maxMessages : null;
  const needMs = Math.max(i.snapshotMaxAgeMs, 2 * i.snapshotIntervalMs);
  // The window each limit keeps at the rate measured over what the stream holds now.
  const sampled = oldestAgeMs !== null && oldestAgeMs >= MIN_SAMPLE_MS;
  const windows = [e.maxAgeMs > 0 ? e.maxAgeMs : Number.POSITIVE_INFINITY];
  if (sampled && e.maxBytes > 0 && e.bytes > 0) windows.push(e.maxBytes / (e.bytes / oldestAgeMs));
  if (sampled && e.maxMessages > 0 && e.messages > 0) windows.push(e.maxMessages / (e.messages / oldestAgeMs));
  const holdsMs = Math.min(...windows);
  const s = i.snapshot;
  const lostAfterSnapshot = s !== undefined && e.lastSeq > s.lastSeq && e.firstSeq > s.lastSeq + 1;
  const full = Math.max(bytesRatio ?? 0, messagesRatio ?? 0);
  const figures = `${e.messages} events, ${Math.round(e.bytes / 1024)} kB${bytesRatio === null ? "" : ` (${Math.round(bytesRatio * 100)}% of max_bytes)`}, oldest ${oldestAgeMs === null ? "none" : human(oldestAgeMs)}; limits hold ${human(holdsMs)} at this rate, a restore needs ${human(needMs)}`;
  const base = { events: e, snapshotSeq: s?.lastSeq ?? null };
  if (lostAfterSnapshot)
    return {
      ...base,
      bytesRatio,
      messagesRatio,
      oldestAgeMs,
      holdsMs,
      needMs,
      lostAfterSnapshot,
      level: "fail",
      summary: `events after the newest snapshot (seq ${(s?.lastSeq ?? 0) + 1}..${e.firstSeq - 1}) are gone: ${figures}`,
    };
  const level = holdsMs < needMs || full > 0.8 ? "warn" : "ok";
  return {
    ...base,
    bytesRatio,
    messagesRatio,
    oldestAgeMs,
    holdsMs,
    needMs,
    lostAfterSnapshot,
    level,
    summary: figures,
  };
}

export function eventsCheck(s: EventsSizing): Check {
  const hint =
    s.level === "fail"
      ? "take a snapshot now (bun run recovery snapshot), then raise EVENTS' max_bytes/max_msgs (docs/runbook.md, Sizing EVENTS)"
      : "raise EVENTS' max_bytes/max_msgs (or snapshot more often) so its limits hold SNAPSHOT_MAX_AGE_MS and two intervals at the measured rate (docs/runbook.md, Sizing EVENTS)";
  return { name: "events", level: s.level, summary: s.summary, ...(s.level === "ok" ? {} : { hint }) };
}

/** Reads EVENTS' state and limits and the newest snapshot, and sizes them. */
export async function probeEventsSizing(
  jsm: JetStreamManager,
  o: { region: string; snapshotDir: string; snapshotIntervalMs: number; snapshotMaxAgeMs: number },
): Promise<EventsSizing> {
  const info = await jsm.streams.info(streams.events(o.region));
  const st = info.state;
  const newest = listSnapshots(o.snapshotDir)[0]?.manifest;
  return eventsSizing({
    events: {
      stream: streams.events(o.region),
      bytes: st.bytes,
      messages: st.messages,
      firstSeq: st.first_seq,
      lastSeq: st.last_seq,
      firstAt: st.messages > 0 && st.first_ts ? Date.parse(st.first_ts) : null,
      maxBytes: info.config.max_bytes,
      maxMessages: info.config.max_msgs,
      maxAgeMs: info.config.max_age / 1e6,
    },
    now: Date.now(),
    snapshotIntervalMs: o.snapshotIntervalMs,
    snapshotMaxAgeMs: o.snapshotMaxAgeMs,
    ...(newest && newest.events.stream === streams.events(o.region)
      ? { snapshot: { lastSeq: newest.events.lastSeq, at: Date.parse(newest.createdAt) } }
      : {}),
  });
}
