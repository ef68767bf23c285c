// Breaker storms (pure; breaker.test.ts): a provider account's circuit breaker open for longer than
// a minute. Each solver keeps a breaker per provider key and publishes every change of it on
// `events.<region>.breaker` ({at, data: {keyRef, state, reason, worker}}). An account's episode
// begins when a first solver's breaker for it leaves `closed` and ends when every solver that left
// it is `closed` again (or has no heartbeat any more: a solver that is gone calls nobody). An
// episode longer than `minOpenMs` is an incident: detected at start + minOpenMs, recovered and
// ended when the episode ends.
import { z } from "zod";
import type { Observation, TimelineEntry } from "./model.ts";

export const BreakerEvent = z.object({
  at: z.string().datetime({ offset: true }),
  data: z.object({
    keyRef: z.string().min(1).max(200),
    state: z.string().min(1).max(40),
    reason: z.string().max(500).nullish(),
    worker: z.string().min(1).max(200).optional(),
  }),
});
export type BreakerEvent = z.infer<typeof BreakerEvent>;

interface Episode {
  keyRef: string;
  /** The sequence of the event that began it: the incident's key. */
  seq: number;
  startedAt: number;
  endedAt?: number;
  /** Workers whose breaker is not closed. */
  open: Set<string>;
  /** Every worker whose breaker left closed in the episode. */
  workers: Set<string>;
  lines: TimelineEntry[];
}

export interface BreakerTracker {
  /** One breaker event (in stream order). */
  add(seq: number, ev: BreakerEvent): void;
  /** Workers without a heartbeat: their breakers no longer count. */
  prune(live: ReadonlySet<string>, now: number): void;
  /** Whether some worker's breaker is open now (only then is there anything to prune). */
  anyOpen(): boolean;
  /** The incidents: episodes open for at least minOpenMs by `now`. */
  observations(region: string, now: number): Observation[];
}

const iso = (ms: number) => new Date(ms).toISOString();

export function breakerTracker(minOpenMs = 60_000, keepMs = 24 * 3600_000): BreakerTracker {
  const current = new Map<string, Episode>();
  const done: Episode[] = [];
  const end = (e: Episode, at: number) => {
    e.endedAt = at;
    current.delete(e.keyRef);
    if (at - e.startedAt >= minOpenMs) done.push(e);
  };
  return {
    add(seq, ev) {
      const at = Date.parse(ev.at);
      const worker = ev.data.worker ?? "?";
      const { keyRef, state } = ev.data;
      let e = current.get(keyRef);
      if (!e && state === "closed") return;
      if (!e) {
        e = { keyRef, seq, startedAt: at, open: new Set(), workers: new Set(), lines: [] };
        current.set(keyRef, e);
      }
      e.lines.push({
        at: iso(at),
        source: "EVENTS",
        what: `breaker of ${keyRef} ${state} at ${worker}${ev.data.reason ? `: ${ev.data.reason}` : ""}`,
      });
      if (state === "closed") e.open.delete(worker);
      else {
        e.open.add(worker);
        e.workers.add(worker);
      }
      if (e.open.size === 0) end(e, at);
    },
    prune(live, now) {
      for (const e of [...current.values()]) {
        for (const w of [...e.open])
          if (!live.has(w)) {
            e.open.delete(w);
            e.lines.push({ at: iso(now), source: "workers", what: `${w} has no heartbeat any more` });
          }
        if (e.open.size === 0) end(e, now);
      }
      while (done.length && now - done[0]!.startedAt > keepMs) done.shift();
    },
    anyOpen: () => current.size > 0,
    observations(region, now) {
      return [...done, ...current.values()]
        .filter((e) => (e.endedAt ?? now) - e.startedAt >= minOpenMs)
        .map((e) => ({
          key: `breaker:${e.keyRef}:${e.seq}`,
          kind: "breaker" as const,
          region,
          summary: `provider account ${e.keyRef}: breaker open for more than ${Math.round(minOpenMs / 1000)} s`,
          startedAt: iso(e.startedAt),
          detectedAt: iso(e.startedAt + minOpenMs),
          ...(e.endedAt !== undefined ? { recoveredAt: iso(e.endedAt), endedAt: iso(e.endedAt) } : {}),
          detail: { keyRef: e.keyRef, workers: e.workers.size },
          timeline: e.lines.slice(0, 200),
        }));
    },
  };
}
