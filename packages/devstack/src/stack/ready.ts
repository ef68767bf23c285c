// When a multi-region stack is ready: each region holds its lease, and each region's events reach
// the other's mirror.
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { openRegionBucket } from "@pipeline/shared/kv";
import { connectNats, type NatsAuth } from "@pipeline/shared/nats";
import { LeaseView, maySubmit } from "@pipeline/shared/regions";
import { eventSubject, streams } from "@pipeline/shared/subjects";
import { eventually } from "../testing/index.ts";

export interface RegionServer {
  name: string;
  nats: { url: string; auth(role: "admin"): NatsAuth };
}

/** Ready when each region holds its lease (its gateway turns tasks away until then). */
export async function waitForLeases(regions: RegionServer[]): Promise<void> {
  for (const r of regions) {
    const nc = await connectNats(r.nats.url, "stack-ready", r.nats.auth("admin"));
    try {
      const kv = await openRegionBucket(nc, r.name);
      await eventually(
        async () => {
          const e = await kv.get("lease");
          return e?.operation === "PUT" && maySubmit(LeaseView.parse(e.json()), r.name, Date.now());
        },
        30_000,
        100,
      );
    } finally {
      await nc.close();
    }
  }
}

/**
 * Ready when each region's EVENTS reaches the other region's mirror (the path every replica row
 * takes): a probe event (no task: the replicator skips it) published in each region must show up
 * in the other's `EVENTS_<region>`. A mirror whose first attempts failed (the leafnode link still
 * coming up) retries with a backoff of its own; a drill that starts its load before then measures
 * that backoff as RPO, not the steady replication lag.
 */
export async function waitForMirrors(regions: RegionServer[]): Promise<void> {
  for (const from of regions) {
    const src = await connectNats(from.nats.url, "stack-mirror-probe", from.nats.auth("admin"));
    try {
      await jetstream(src).publish(
        eventSubject(from.name, "probe"),
        JSON.stringify({ kind: "probe", region: from.name, at: new Date().toISOString() }),
      );
      const seq = (await (await jetstreamManager(src)).streams.info(streams.events(from.name))).state.last_seq;
      for (const to of regions.filter((r) => r.name !== from.name)) {
        const dst = await connectNats(to.nats.url, "stack-mirror-wait", to.nats.auth("admin"));
        try {
          const jsm = await jetstreamManager(dst);
          await eventually(
            async () =>
              ((await jsm.streams.info(streams.events(from.name)).catch(() => undefined))?.state.last_seq ?? 0) >= seq,
            60_000,
            200,
          );
        } finally {
          await dst.close();
        }
      }
    } finally {
      await src.close();
    }
  }
}
