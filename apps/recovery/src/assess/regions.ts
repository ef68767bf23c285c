// What `assess` says about two regions: the lease this region's solvers see, and, per other
// region, the mirror of its events (lag, and how long since the link was last active: a mirror
// whose `error` is empty can still be stalled) and the replicator's backlog. Probes read NATS;
// `regionChecks` turns what they read into verdicts (pure).
import type { JetStreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { LeaseView, maySubmit } from "@pipeline/shared/regions";
import { streams } from "@pipeline/shared/subjects";
import type postgres from "postgres";
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
  /** This region's share of each provider account's plan (provider_plan_shares), when the database was read. */
  shares?: PlanShareRow[] | Error;
}

export interface PlanShareRow {
  keyRef: string;
  threads: number;
  /** Seconds the share is still valid (negative: lapsed). */
  validS: number;
}

/** This region's shares of the plan, as its solvers lease against them. */
export async function probePlanShares(sql: postgres.Sql): Promise<PlanShareRow[] | Error> {
  return sql<{ key_ref: string; threads: number; valid_s: number }[]>`
    select key_ref, threads, extract(epoch from valid_until - now())::float8 as valid_s
    from provider_plan_shares order by key_ref`
    .then((rows) =>
      rows.map((r) => ({ keyRef: r.key_ref, threads: r.threads, validS: Math.round(r.valid_s * 10) / 10 })),
    )
    .catch((e: Error) => e);
}

export async function probeRegions(
  jsm: JetStreamManager,
  regionKv: KV,
  local: string,
  remotes: string[],
  sql?: postgres.Sql,
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
  return { local, lease, mirrors, now: Date.now(), ...(sql ? { shares: await probePlanShares(sql) } : {}) };
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
  out.push(...planChecks(p));
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

/** The plan's shares: held while the lease is, lapsed with it (docs/regions.md). */
function planChecks(p: RegionsProbe): Check[] {
  if (p.shares instanceof Error)
    return [{ name: "plan", level: "warn", summary: `plan shares unreadable: ${p.shares.message}` }];
  const holds = !(p.lease instanceof Error) && !!p.lease && maySubmit(p.lease, p.local, p.now);
  return (p.shares ?? []).map((s): Check => {
    if (s.validS > 0)
      return {
        name: "plan",
        level: "ok",
        summary: `${s.keyRef}: this region's share of the plan is ${s.threads} threads`,
      };
    return {
      name: "plan",
      level: holds ? "fail" : "warn",
      summary: `${s.keyRef}: share lapsed ${Math.round(-s.validS)} s ago: this region's solvers start no provider task`,
      hint: holds
        ? "the lease keeper holds the lease but cannot write the plan record or the database: see the recovery service's log (plan share round failed)"
        : "the region is fenced: its share comes back with its lease",
    };
  });
}
