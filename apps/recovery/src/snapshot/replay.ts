import { DeliverPolicy, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { progressBar } from "@pipeline/shared/progress";
import { TaskEvent, taskEventOf } from "@pipeline/shared/schemas";
import { streams } from "@pipeline/shared/subjects";
import type postgres from "postgres";
import { type Applied, applyEvent, noneApplied } from "./apply-event.ts";
import { type BodySource, bodySource, strictBodySource } from "./bodies.ts";

/** Raised when EVENTS cannot give back every event after the snapshot (aged out, or the stream was recreated). */
export class ReplayGapError extends Error {
  override name = "ReplayGapError";
}

export interface ReplayReport {
  stream: string;
  fromSeq: number;
  toSeq: number;
  events: number;
  counts: Record<Applied, number>;
  ms: number;
}

export interface ReplayOptions {
  sql: postgres.Sql;
  js: JetStreamClient;
  jsm: JetStreamManager;
  region: string;
  /** The snapshot's recorded sequence: replay starts after it. */
  afterSeq: number;
  /** The stream's creation time recorded with the snapshot; a different one means sequences restarted. */
  streamCreated?: string;
  /** Replay even when events after the snapshot are gone (the result then misses them: RPO > 0). */
  allowGap?: boolean;
  /**
   * `js`/`jsm` reach a mirror of EVENTS in another region's domain (the origin was lost with the
   * host): a mirror keeps the origin's sequences but has its own creation time, so that check is
   * skipped; the range check still holds.
   */
  mirror?: boolean;
  batch?: number;
  /** Where image bodies are read (default: BODIES_<REGION> through `jsm`, so the mirror's with `mirror`). */
  bodies?: BodySource;
}

/**
 * Replays EVENTS from `afterSeq + 1` up to the last sequence at the start of the call into the
 * rows, in stream order, one transaction per batch, each event idempotent by version
 * (`applyEvent`). Refuses (ReplayGapError) when events after the snapshot are no longer in the
 * stream, since the restored database would then silently miss acknowledged work.
 */
export async function replayEvents(o: ReplayOptions): Promise<ReplayReport> {
  const started = Date.now();
  const name = streams.events(o.region);
  const info = await o.jsm.streams.info(name);
  if (o.mirror && info.config.mirror?.name !== name)
    throw new ReplayGapError(`${name} in that domain is not a mirror of this region's EVENTS`);
  if (o.streamCreated && info.created !== o.streamCreated && !o.allowGap && !o.mirror)
    throw new ReplayGapError(
      `${name} was recreated since the snapshot (created ${info.created}, snapshot saw ${o.streamCreated}): its sequences no longer match`,
    );
  if (info.state.first_seq > o.afterSeq + 1 && info.state.last_seq > o.afterSeq && !o.allowGap)
    throw new ReplayGapError(
      `${name} no longer holds events ${o.afterSeq + 1}..${info.state.first_seq - 1} (max age or size reached): take snapshots more often than EVENTS keeps events`,
    );
  const counts = noneApplied();
  const bodies = strictBodySource(o.bodies ?? bodySource(o.jsm));
  const target = info.state.last_seq;
  let events = 0;
  let lastSeq = o.afterSeq;
  // An event can reach EVENTS before the task's `accepted` (the gateway publishes that one after
  // the task message, so a fast solver's `solving` may come first): such events are kept and
  // applied again once the whole range has been read.
  const orphans: TaskEvent[] = [];
  const applyBatch = async (batch: Array<TaskEvent | undefined>, final: boolean) =>
    o.sql.begin(async (tx) => {
      for (const ev of batch) {
        const r: Applied = ev ? await applyEvent(tx, ev, bodies, { ledger: true }) : "skipped";
        if (r === "missing" && !final && ev) orphans.push(ev);
        else counts[r]++;
      }
    });
  if (target > o.afterSeq) {
    const consumer = await o.js.consumers.get(name, {
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: o.afterSeq + 1,
    });
    const messages = await consumer.consume({ max_messages: o.batch ?? 500 });
    // On a terminal: events replayed of those after the snapshot, with an estimate (quiet when piped).
    const bar = progressBar("restore: replaying EVENTS", target - o.afterSeq, { unit: "events" });
    let batch: Array<TaskEvent | undefined> = [];
    // Stalls only if the stream lost messages in the range; the check above makes that rare.
    const stall = setInterval(() => {
      if (Date.now() - lastAt > 5000) void messages.close();
    }, 1000);
    let lastAt = Date.now();
    try {
      for await (const m of messages) {
        lastAt = Date.now();
        if (m.seq > target) break;
        const ev = taskEventOf(m);
        batch.push(ev);
        events++;
        lastSeq = m.seq;
        if (batch.length >= (o.batch ?? 500) || m.seq >= target) {
          await applyBatch(batch, false);
          batch = [];
          bar.update(m.seq - o.afterSeq);
        }
        if (m.seq >= target) break;
      }
      if (batch.length) await applyBatch(batch, false);
    } finally {
      bar.done();
      clearInterval(stall);
      await messages.close().catch(() => {});
      await consumer.delete().catch(() => {});
    }
    if (orphans.length) await applyBatch(orphans, true);
  }
  return { stream: name, fromSeq: o.afterSeq + 1, toSeq: lastSeq, events, counts, ms: Date.now() - started };
}
