// The pure decisions of a deploy: which hosts, in which batches, what a host's health check is,
// which releases to keep. No I/O here (plan.test.ts).
import type { Host } from "./inventory.ts";

export const DEPLOYABLE = ["gateway", "solver", "recovery", "rollout"] as const;
export type DeployApp = (typeof DEPLOYABLE)[number];

/** The hosts that run `app` (role `app`), in `region` when given, in inventory order. */
export function targetHosts(hosts: Host[], region?: string): Host[] {
  return hosts.filter((h) => h.roles.includes("app") && (!region || h.region === region));
}

/** Hosts in batches of `size`; a batch is deployed at once, the next only when it is healthy. */
export function batches<T>(items: T[], size: number): T[][] {
  if (!Number.isInteger(size) || size < 1) throw new Error("batch size must be a positive integer");
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** The systemd unit of an app version: gateway, recovery and rollout have one, the solver one per version. */
export function unitOf(app: DeployApp, version: string): string {
  return app === "solver" ? `solver@${version}.service` : `${app}.service`;
}

/** `uname -m` to our binaries' arch names. */
export function archOf(uname: string): "x64" | "arm64" {
  const m = uname.trim();
  if (m === "x86_64" || m === "amd64") return "x64";
  if (m === "aarch64" || m === "arm64") return "arm64";
  throw new Error(`unsupported machine ${JSON.stringify(m)} (x86_64 and aarch64 only)`);
}

/**
 * Releases to delete so that `keep` remain: oldest first by install time, never one in use
 * (`current`, or a solver version that runs).
 */
export function releasesToPrune(
  releases: { version: string; installedAt: number }[],
  inUse: Set<string>,
  keep: number,
): string[] {
  const sorted = [...releases].sort((a, b) => b.installedAt - a.installedAt || b.version.localeCompare(a.version));
  const kept = new Set<string>();
  for (const r of sorted) if (inUse.has(r.version)) kept.add(r.version);
  for (const r of sorted) if (kept.size < keep) kept.add(r.version);
  return sorted.filter((r) => !kept.has(r.version)).map((r) => r.version);
}

/** The solver version's metrics port: the one it has, else the lowest from `base` no other version uses. */
export function solverPort(version: string, taken: Map<string, number>, base = 9464): number {
  const own = taken.get(version);
  if (own) return own;
  const used = new Set(taken.values());
  let p = base;
  while (used.has(p)) p++;
  return p;
}
