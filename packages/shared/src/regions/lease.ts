// Region leases: who may make new provider submissions for a region's tasks. Each region's
// keeper renews `lease.<region>` in the witness's KV (a quorum a region cut off from the others
// cannot reach) by compare-and-set; a keeper that sees another region's lease unchanged for
// TTL + margin takes it over (epoch + 1) and adopts that region's unfinished tasks. A region's
// solvers stop new submissions once their keeper has not renewed for TTL - margin, so a cut-off
// region has stopped before another can take over: 2 x margin apart. Pure: decisions only.
import { z } from "zod";

export const Lease = z.object({
  holder: z.string().min(1),
  epoch: z.number().int().min(1),
  /** The holder's wall clock at the renewal (informational: decisions use the watcher's own clock). */
  renewedAt: z.number(),
});
export type Lease = z.infer<typeof Lease>;

/** What a region's solvers read (KV `region_<r>`, key `lease`): until when they may submit. */
export const LeaseView = z.object({ holder: z.string(), epoch: z.number().int(), validUntil: z.number() });
export type LeaseView = z.infer<typeof LeaseView>;

export interface LeaseTiming {
  ttlMs: number;
  marginMs: number;
}

/**
 * The defaults (docs/regions.md, "The witness's timings"). What they must survive: the witness
 * node leading the leases stream lost. Until the other two elect a leader (nats-server's Raft
 * election timeout, random in 4-9 s after the last word from the old leader) every renewal
 * fails; the longest a region then goes without renewing is `leaderLossGapMs`: its last renewal
 * up to a renew interval before the loss, the election, and the failed round's retry. TTL −
 * margin (17 s) is 1.6 × that bound (10.25 s) and 1.8 × the longest gap measured after a leader
 * loss (9.2 s, tests/region-witness-cluster.test.ts; 7.8 s in 15 kills on 127.0.0.1): losing the
 * leading node fences no region. The price: a truly lost region is taken over TTL + margin (23 s)
 * after its last renewal, instead of 13 s.
 */
export const DEFAULT_LEASE_TIMING: LeaseTiming = { ttlMs: 20_000, marginMs: 3000 };
export const DEFAULT_LEASE_RENEW_MS = 1000;
/** A keeper's round that failed (the witness unreachable, or electing a leader) is retried this soon. */
export const LEASE_RETRY_MS = 250;
/** The longest a witness leader election can take (nats-server's maximum Raft election timeout). */
export const WITNESS_ELECTION_MAX_MS = 9000;

/** The longest a keeper goes without renewing when the witness's leader is lost (see DEFAULT_LEASE_TIMING). */
export function leaderLossGapMs(renewMs: number, retryMs = LEASE_RETRY_MS): number {
  return renewMs + WITNESS_ELECTION_MAX_MS + Math.min(retryMs, renewMs);
}

/** The witness's entry for a region as a keeper saw it: the value, its revision, when it last changed (keeper's monotonic clock). */
export interface Observed {
  lease: Lease | undefined;
  revision: number;
  changedAt: number;
}

export type OwnAction =
  | { kind: "create" }
  | { kind: "renew"; epoch: number }
  | { kind: "reclaim"; epoch: number }
  | { kind: "wait"; why: string };

/** What a keeper does about its own region's lease. */
export function ownLeaseAction(local: string, seen: Observed | undefined, now: number, t: LeaseTiming): OwnAction {
  if (!seen?.lease) return { kind: "create" };
  if (seen.lease.holder === local) return { kind: "renew", epoch: seen.lease.epoch };
  // Another region took it over during a failover and does not renew it: take it back once it
  // has been still for a whole TTL and margin (its adopted tasks stay with it: docs/regions.md).
  if (now - seen.changedAt >= t.ttlMs + t.marginMs) return { kind: "reclaim", epoch: seen.lease.epoch + 1 };
  return { kind: "wait", why: `held by ${seen.lease.holder} (epoch ${seen.lease.epoch})` };
}

export type OtherAction = { kind: "takeover"; epoch: number } | { kind: "wait" };

/** What a keeper does about another region's lease: take it over when its holder went silent. */
export function otherLeaseAction(remote: string, seen: Observed | undefined, now: number, t: LeaseTiming): OtherAction {
  if (!seen?.lease || seen.lease.holder !== remote) return { kind: "wait" };
  return now - seen.changedAt >= t.ttlMs + t.marginMs
    ? { kind: "takeover", epoch: seen.lease.epoch + 1 }
    : { kind: "wait" };
}

/** Until when (wall clock) a region that renewed at `renewedAt` may submit: TTL - margin after it. */
export function validUntil(renewedAt: number, t: LeaseTiming): number {
  return renewedAt + t.ttlMs - t.marginMs;
}

/** The solvers' gate: may a new provider submission be made now? */
export function maySubmit(view: LeaseView | undefined, local: string, now: number): boolean {
  return !!view && view.holder === local && now < view.validUntil;
}
