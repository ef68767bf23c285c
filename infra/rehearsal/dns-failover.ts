// Health-checked failover of the shared name (docs/deploy.md, "Clients and a lost region"): each
// region's load balancer is checked on `/readyz/accepting`; one that fails `fall` checks in a row
// leaves the answer, and comes back after `rise` good ones. The answer lists the load balancers in
// rotation in the regions' order (the first is where clients go); with none in rotation it lists
// them all, since an empty answer helps no client. Pure: dns-server.ts runs it.

export interface Target {
  region: string;
  address: string;
}

export interface TargetHealth {
  inRotation: boolean;
  /** Consecutive checks that disagreed with `inRotation` (a change after fall/rise of them). */
  streak: number;
  /** When it last entered or left the rotation (epoch ms), or undefined: never changed. */
  changedAt?: number;
}

export interface FailoverRules {
  fall: number;
  rise: number;
}

export const DEFAULT_RULES: FailoverRules = { fall: 2, rise: 2 };

/** Everything in rotation at start: a fresh server answers every region until checks say otherwise. */
export function initialHealth(targets: Target[]): Record<string, TargetHealth> {
  return Object.fromEntries(targets.map((t) => [t.region, { inRotation: true, streak: 0 }]));
}

/** The health after one round of checks (`ok[region]`), at `now`. */
export function nextHealth(
  health: Record<string, TargetHealth>,
  ok: Record<string, boolean>,
  now: number,
  rules: FailoverRules = DEFAULT_RULES,
): Record<string, TargetHealth> {
  const out: Record<string, TargetHealth> = {};
  for (const [region, h] of Object.entries(health)) {
    const good = ok[region] ?? false;
    if (good === h.inRotation) {
      out[region] = { ...h, streak: 0 };
      continue;
    }
    const streak = h.streak + 1;
    const flips = streak >= (h.inRotation ? rules.fall : rules.rise);
    out[region] = flips ? { inRotation: !h.inRotation, streak: 0, changedAt: now } : { ...h, streak };
  }
  return out;
}

/** The addresses the shared name resolves to. */
export function answerOf(targets: Target[], health: Record<string, TargetHealth>): string[] {
  const up = targets.filter((t) => health[t.region]?.inRotation);
  return (up.length ? up : targets).map((t) => t.address);
}
