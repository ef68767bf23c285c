// What the recovery service tells the operators' webhook, from what it saw (pure; messages.test.ts).
// Each message's key names its event once: a lease epoch, a storm's start, a growth's first
// dead letter; the sender (@pipeline/shared/notify) drops a key it has sent before.
import type { Notification } from "@pipeline/shared/notify";
import type { Observation } from "../incidents/model.ts";
import type { LeaseEvent } from "../regions/lease-keeper.ts";

const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** A fence, a return to service, a takeover: what the operator hears (a return only after a fence it heard of). */
export function leaseNotification(e: LeaseEvent): Notification {
  switch (e.kind) {
    case "fenced":
      return {
        key: `fence:${e.region}:${e.epoch}`,
        kind: "fenced",
        severity: "critical",
        region: e.region,
        title: `region ${e.region} fenced: its solvers stopped submitting`,
        text: `The region's lease (epoch ${e.epoch}) was not renewed before its view lapsed at ${new Date(e.at).toISOString()}: the witness is out of reach, or another region took the lease over. Tasks wait (nothing is lost); another region adopts them if the lease is taken over.`,
        path: "/console",
      };
    case "unfenced":
      return {
        key: `unfence:${e.region}:${e.epoch}:${e.at}`,
        kind: "fenced",
        severity: "info",
        region: e.region,
        title: `region ${e.region} serves again`,
        text: `Lease renewed (epoch ${e.epoch}) after ${secs(e.fencedForMs)} fenced.`,
        path: "/console",
      };
    case "takeover":
      return {
        key: `failover:${e.remote}:${e.epoch}`,
        kind: "failover",
        severity: "critical",
        region: e.region,
        title: `failover: region ${e.remote} taken over by ${e.region}`,
        text: `${e.remote} was silent ${secs(e.stillForMs)} past its lease; ${e.region} holds it now (epoch ${e.epoch}) and adopts its unfinished tasks.`,
        path: "/console",
      };
  }
}

/**
 * A breaker storm, told when the incident detector opens its incident (apps/recovery/src/incidents,
 * breaker.ts: an account's breaker left closed at a solver and stayed open BREAKER_STORM_MS).
 */
export function breakerStormNotification(
  o: Pick<Observation, "key" | "region" | "summary" | "startedAt" | "detail">,
  incidentId: number,
): Notification {
  const keyRef = String(o.detail?.keyRef ?? "?");
  return {
    key: `storm:${o.region}:${o.key}`,
    kind: "breaker_storm",
    severity: "critical",
    region: o.region,
    title: `breaker storm: ${o.summary}`,
    text: `The breaker of provider account ${keyRef} has been open since ${o.startedAt} (${o.detail?.workers ?? "?"} solver(s)): the provider refuses or fails; its tasks wait for it, or go to another account when several are configured. Incident ${incidentId}.`,
    path: `/console/incidents/${incidentId}`,
  };
}

/** Dead letters grew by `grew` within the window. */
export function dlqGrowthNotification(
  region: string,
  o: { fromSeq: number; grew: number; windowMs: number },
): Notification {
  return {
    key: `dlq:${region}:${o.fromSeq}`,
    kind: "dlq_growth",
    severity: "warning",
    region,
    title: `dead letters growing: ${o.grew} new in ${Math.round(o.windowMs / 60_000)} min`,
    text: `${o.grew} tasks were dead-lettered in ${region} within ${Math.round(o.windowMs / 1000)} s. The console's task explorer lists them (state failed); "Redrive all matching" redrives them once the cause is fixed.`,
    path: "/console",
  };
}
