// A region's lease taken over by this region, as an incident (pure; sources.test.ts). The lease
// keeper takes a remote's lease over once it has been still for TTL + margin, then adopts its
// unfinished tasks (regions/lease-keeper.ts, adopt.ts); it keeps `adopted.<remote>` (epoch, phase,
// when) in this region's bucket. Start: the remote's last renewal, TTL + margin before the
// takeover; detection: the takeover; recovery and end: the adoption of the tasks that can be
// resumed (this region serving them). Tasks affected: the tasks adopted, both phases.
import { z } from "zod";
import type { Observation } from "./model.ts";

/** The keeper's adoption record (KV `region_<r>`, key `adopted.<remote>`). */
export const AdoptionRecord = z.object({
  epoch: z.number().int().min(1),
  phase: z.string(),
  at: z.number().int().positive(),
});
export type AdoptionRecord = z.infer<typeof AdoptionRecord>;

export interface FailoverSighting {
  /** This region (the survivor). */
  local: string;
  remote: string;
  epoch: number;
  /** When the takeover was seen (epoch ms): the adoption began. */
  takenOverAt: number;
  /** When the resumable tasks were adopted (epoch ms), if that is done. */
  adoptedAt?: number;
  /** The lease's TTL + margin: how long the remote had been still at the takeover. */
  stillMs: number;
  /** Tasks adopted in this phase. */
  adopted?: { phase: "resumable" | "all"; count: number; withProviderId: number };
}

export const failoverKey = (remote: string, epoch: number) => `failover:${remote}:${epoch}`;

const iso = (ms: number) => new Date(ms).toISOString();

export function failoverObservation(s: FailoverSighting): Observation {
  const startedAt = iso(s.takenOverAt - s.stillMs);
  const timeline = [
    {
      at: startedAt,
      source: "leases",
      what: `${s.remote} renewed its lease for the last time (still ${s.stillMs} ms before the takeover)`,
    },
    { at: iso(s.takenOverAt), source: "leases", what: `${s.local} took ${s.remote}'s lease over (epoch ${s.epoch})` },
  ];
  if (s.adopted && s.adoptedAt)
    timeline.push({
      at: iso(s.adoptedAt),
      source: "adopt",
      what: `${s.local} adopted ${s.adopted.count} unfinished task(s) of ${s.remote} (phase ${s.adopted.phase}, ${s.adopted.withProviderId} resumed by their provider id)`,
    });
  const recovered = s.adoptedAt !== undefined && (!s.adopted || s.adopted.phase === "resumable");
  return {
    key: failoverKey(s.remote, s.epoch),
    kind: "failover",
    region: s.remote,
    summary: `region ${s.remote} went silent; ${s.local} took its lease over (epoch ${s.epoch}) and serves its tasks`,
    startedAt,
    detectedAt: iso(s.takenOverAt),
    ...(recovered ? { recoveredAt: iso(s.adoptedAt!), endedAt: iso(s.adoptedAt!) } : {}),
    detail: {
      survivor: s.local,
      epoch: s.epoch,
      ...(s.adopted ? { [`adopted_${s.adopted.phase}`]: s.adopted.count } : {}),
    },
    timeline,
  };
}
