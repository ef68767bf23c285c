// What `assess` says about two regions: the lease this region's solvers see, and, per other
// region, the mirror of its events (lag, and how long since the link was last active: a mirror
// whose `error` is empty can still be stalled) and the replicator's backlog. Probes read NATS;
// `regionChecks` turns what they read into verdicts (pure).
import type { JetStreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { LeaseView, maySubmit } from "@pipeline/shared/regions";
import { streams } from "@pipeline/shared/subjects";
import { replicaConsumer } from "../regions/replicator.ts";
import type { Check } from "./model.ts";

export interface RegionsProbe {
  local: string;
  lease: LeaseView | undefined | Error;
  mirrors: Array<
    | { remote: string; lag: number; activeMs: number | null; replicaPending: number | null }
    | { remote: string; error: string }
  >;
  now: number;
}

export async function probeRegions(
  jsm: JetStreamManager,
  regionKv: KV,
  local: string,
  remotes: string[],
): Promise<RegionsProbe> {
  const lease = await regionKv
    .get("lease")
    .then((e) => (e?.operation === "PUT" ? LeaseView.parse(e.json()) : undefined))
    .catch((e: Error) => e);
  const mirrors: RegionsProbe["mirrors"] = [];
  for (const remote of remotes) {
    try {
      const info = await jsm.streams.info(streams.events(remote));
      const replica = await jsm.consumers.info(streams.events(remote), replicaConsumer(local)).catch(() => undefined);
      mirrors.push({
        remote,
        lag: info.mirror?.lag ?? 0,
        activeMs: info.mirror ? Math.round(info.mirror.active / 1e6) : null,
        replicaPending: replica ? replica.num_pending + replica.num_ack_pending : null,
      });
    } catch (err) {
      mirrors.push({ remote, error: (err as Error).message });
    }
  }
  return { local, lease, mirrors, now: Date.now() };
}

/** Verdicts: the lease (held and valid, or why not), and each mirror (active, lag, backlog). */
export function regionChecks(p: RegionsProbe, activeLimitMs = 10_000): Check[] {
  const out: Check[] = [];
  if (p.lease instanceof Error)
    out.push({
      name: "lease",
      level: "fail",
      summary: `lease view unreadable: ${p.lease.message}`,
      hint: "is the recovery service (lease keeper) running?",
    });
  else if (!p.lease)
    out.push({
      name: "lease",
      level: "fail",
      summary: "no lease view: this region's solvers make no provider submission",
      hint: "start the recovery service with WITNESS_URL",
    });
  else if (maySubmit(p.lease, p.local, p.now))
    out.push({
      name: "lease",
      level: "ok",
      summary: `held by ${p.local}, epoch ${p.lease.epoch}, valid ${Math.round((p.lease.validUntil - p.now) / 1000)} s more`,
    });
  else if (p.lease.holder !== p.local)
    out.push({
      name: "lease",
      level: "warn",
      summary: `held by ${p.lease.holder} (epoch ${p.lease.epoch}): a failover took it; this region is fenced until it reclaims it`,
      hint: "nothing to do once the witness and the other region are reachable: it is reclaimed by itself (docs/regions.md)",
    });
  else
    out.push({
      name: "lease",
      level: "fail",
      summary: `lapsed ${Math.round((p.now - p.lease.validUntil) / 1000)} s ago: fenced, no provider submissions`,
      hint: "the witness is unreachable from here, or the lease keeper stopped: check WITNESS_URL and the recovery service",
    });
  for (const m of p.mirrors) {
    if ("error" in m)
      out.push({
        name: "replica",
        level: "fail",
        summary: `events of ${m.remote}: ${m.error}`,
        hint: "the recovery service creates the mirror; is the leafnode link configured?",
      });
    else if (m.activeMs === null || m.activeMs > activeLimitMs)
      out.push({
        name: "replica",
        level: "warn",
        summary: `events of ${m.remote}: mirror not active for ${m.activeMs === null ? "?" : Math.round(m.activeMs / 1000)} s (lag ${m.lag})`,
        hint: "the link between the regions is down: reads of its tasks are stale here; a takeover follows if its lease lapses",
      });
    else
      out.push({
        name: "replica",
        level: "ok",
        summary: `events of ${m.remote}: lag ${m.lag}, active ${m.activeMs} ms ago, ${m.replicaPending ?? "?"} to apply`,
      });
  }
  return out;
}
