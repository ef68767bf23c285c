// The replicated projection: another region's events, mirrored into this region's JetStream
// (eventsMirrorConfig), applied to this region's Postgres with the same idempotent applyEvent the
// restore replay uses. The rows keep their home region (`tasks.region`), so this region's gateway
// answers reads of them and recognizes an Idempotency-Key they were accepted with, while its
// queue, sweeps and solvers leave them alone (they belong to their home region, or to its adopter).
import { AckPolicy, DeliverPolicy, type ConsumerMessages, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { nanos } from "@nats-io/transport-node";
import type { Logger } from "@pipeline/shared/log";
import { ensureConsumer, ensureStream, eventsMirrorConfig } from "@pipeline/shared/nats";
import { taskEventOf } from "@pipeline/shared/schemas";
import { streams } from "@pipeline/shared/subjects";
import type postgres from "postgres";
import { applyEvent, type Applied } from "../snapshot/apply-event.ts";

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
  const durable = replicaConsumer(d.local);
  await ensureConsumer(d.jsm, stream, { durable_name: durable, ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, ack_wait: nanos(30_000), max_deliver: -1, max_ack_pending: 1000 });
  const consumer = await d.js.consumers.get(stream, durable);
  const counts: Record<Applied, number> = { inserted: 0, applied: 0, stale: 0, missing: 0, skipped: 0 };
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
          const r = await applyEvent(d.sql, ev);
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
