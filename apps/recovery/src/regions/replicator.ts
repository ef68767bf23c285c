// The replicated projection: another region's events, mirrored into this region's JetStream
// (eventsMirrorConfig), applied to this region's Postgres with the same idempotent applyEvent the
// restore replay uses. The rows keep their home region (`tasks.region`), so this region's gateway
// answers reads of them and recognizes an Idempotency-Key they were accepted with, while its
// queue, sweeps and solvers leave them alone (they belong to their home region, or to its adopter).
import {
  AckPolicy,
  type ConsumerMessages,
  DeliverPolicy,
  type JetStreamClient,
  type JetStreamManager,
} from "@nats-io/jetstream";
import { nanos } from "@nats-io/transport-node";
import type { Logger } from "@pipeline/shared/log";
import {
  bodiesMirrorConfig,
  DEFAULT_BODIES_MAX_AGE_MS,
  ensureConsumer,
  ensureStream,
  eventsMirrorConfig,
} from "@pipeline/shared/nats";
import { type TaskEvent, taskEventOf } from "@pipeline/shared/schemas";
import { streams } from "@pipeline/shared/subjects";
import { BodyRefs } from "@pipeline/shared/tasks";
import type postgres from "postgres";
import { type Applied, applyEvent, noneApplied } from "../snapshot/apply-event.ts";
import { type BodyLookup, type BodySource, bodySource } from "../snapshot/bodies.ts";

export interface ReplicatorDeps {
  js: JetStreamClient;
  jsm: JetStreamManager;
  sql: postgres.Sql;
  /** This region, and the region whose events it applies. */
  local: string;
  remote: string;
  log: Logger;
  /** Redelivery delay of an event that came before its task's `accepted` (default 1 s). */
  retryMs?: number;
  /** Copies of the mirror in this region's cluster (STREAM_REPLICAS). */
  replicas?: number;
  /** Retention of the mirror of the other region's BODIES (BODIES_MAX_AGE_MS). */
  bodiesMaxAgeMs?: number;
  /** How long an image task's `accepted` waits for its body once the bodies mirror says it is caught up (default 30 s). */
  bodyGraceMs?: number;
}

export interface Replicator {
  /** Applied events by outcome since the start. */
  counts(): Record<Applied, number>;
  /** Sequence (in the mirror) of the last event applied. */
  lastSeq(): number;
  stop(): Promise<void>;
}

/** Durable consumer name of a region's replicator on another region's mirrored EVENTS. */
export const replicaConsumer = (local: string) => `replica_${local}`.replace(/[^A-Za-z0-9_-]/g, "_");

export async function startReplicator(d: ReplicatorDeps): Promise<Replicator> {
  const stream = streams.events(d.remote);
  await ensureStream(d.jsm, eventsMirrorConfig(d.remote, d.replicas ?? 1));
  // Its image bodies, mirrored the same way: an `accepted` event names them, BODIES holds them.
  await ensureStream(
    d.jsm,
    bodiesMirrorConfig(d.remote, d.replicas ?? 1, d.bodiesMaxAgeMs ?? DEFAULT_BODIES_MAX_AGE_MS),
  );
  const bodies = bodySource(d.jsm);
  const durable = replicaConsumer(d.local);
  await ensureConsumer(d.jsm, stream, {
    durable_name: durable,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: nanos(30_000),
    max_deliver: -1,
    max_ack_pending: 1000,
  });
  const consumer = await d.js.consumers.get(stream, durable);
  const counts = noneApplied();
  let last = 0;
  let messages: ConsumerMessages | undefined;
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        messages = await consumer.consume({ max_messages: 500 });
        for await (const m of messages) {
          const ev = taskEventOf(m);
          // Only task events of the remote region (alerts and breaker events carry no task).
          if (!ev || ev.region !== d.remote) {
            counts.skipped++;
            m.ack();
            continue;
          }
          const body = await bodyFor(d, ev, bodies);
          if (body === "wait") {
            // The bodies mirror is behind the events mirror (large bodies, a link that just came back).
            m.nak(d.retryMs ?? 1000);
            continue;
          }
          const r = await applyEvent(d.sql, ev, body);
          if (r === "bodyUnavailable")
            d.log.warn(
              { remote: d.remote, taskId: ev.taskId },
              "replicator: image body gone from the mirror of BODIES; task rebuilt failed (BODY_UNAVAILABLE)",
            );
          if (r === "missing") {
            // Its `accepted` is further on in the stream (published right after the task message).
            counts.missing++;
            m.nak(d.retryMs ?? 1000);
            continue;
          }
          counts[r]++;
          last = m.seq;
          m.ack();
        }
      } catch (err) {
        if (!running) break;
        d.log.warn({ remote: d.remote, err: (err as Error).message }, "replicator: consume failed; retrying");
        await Bun.sleep(1000);
      }
    }
  })();
  d.log.info({ remote: d.remote, stream, durable }, "replicating another region's events");
  return {
    counts: () => ({ ...counts }),
    lastSeq: () => last,
    async stop() {
      running = false;
      await messages?.close();
      await loop;
    },
  };
}

/**
 * The body source for one event: undefined when it names no body; "wait" while its body may
 * still arrive (the mirror of BODIES behind, or not heard from lately, or the event younger than
 * the grace), so the event is delivered again later; else the lookup's answer, found or gone
 * (older than the retention, or the mirror caught up without it).
 */
async function bodyFor(d: ReplicatorDeps, ev: TaskEvent, bodies: BodySource): Promise<BodySource | "wait" | undefined> {
  if (ev.kind !== "accepted") return undefined;
  const refs = BodyRefs.safeParse((ev.data as { bodies?: unknown } | undefined)?.bodies);
  if (!refs.success || refs.data.length === 0) return undefined;
  const found = await bodies(ev.region, ev.taskId, refs.data);
  const answer: BodySource = async (): Promise<BodyLookup> => found;
  if (found.ok) return answer;
  const ageMs = Date.now() - Date.parse(ev.at);
  if (ageMs > (d.bodiesMaxAgeMs ?? DEFAULT_BODIES_MAX_AGE_MS)) return answer;
  if (ageMs < (d.bodyGraceMs ?? 30_000)) return "wait";
  const info = await d.jsm.streams.info(streams.bodies(d.remote)).catch(() => undefined);
  const mirror = info?.mirror;
  const caughtUp = mirror !== undefined && mirror.lag === 0 && mirror.active >= 0 && mirror.active < 10e9;
  return caughtUp ? answer : "wait";
}
