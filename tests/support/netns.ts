// Network namespaces and veth links for the tests that put processes on hosts of their own (root
// only; CI runs as root): tests/support/netns-solver.ts (one solver whose cable is pulled) and
// tests/support/two-regions-netns.ts (two regions and a witness joined by a WAN bridge). Creating
// them, and removing them at stop or, if this process dies first, by a watchdog.
import { spawn, spawnSync } from "node:child_process";
import { runCommand } from "@pipeline/devstack";

/** A command that must succeed (setup and teardown only: it blocks this process's relays). */
export function sh(args: string[]): string {
  const r = spawnSync(args[0]!, args.slice(1), { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${args.join(" ")}: ${(r.stderr || r.stdout).trim()}`);
  return r.stdout;
}

/** A command run while relays in this process carry traffic: async, so they keep working. */
export async function shAsync(args: string[]): Promise<void> {
  const { code, output } = await runCommand(args);
  if (code !== 0) throw new Error(`${args.join(" ")}: ${output.trim()}`);
}

/** `ip -o -4 addr show`: the IPv4 addresses in use on this host (to pick a free range). */
export const usedAddresses = (): string => sh(["ip", "-o", "-4", "addr", "show"]);

/** A network namespace with its loopback up. */
export function addNamespace(ns: string): void {
  sh(["ip", "netns", "add", ns]);
  sh(["ip", "-n", ns, "link", "set", "lo", "up"]);
}

/**
 * A veth pair from this namespace into `ns`: `hostIf` stays here (with `hostCidr` if given, on
 * bridge `master` if given), its peer `peer` moves into `ns`, renamed `nsName` there if given,
 * with `nsCidr`. Both ends up.
 */
export function addVeth(o: {
  hostIf: string;
  peer: string;
  ns: string;
  nsName?: string;
  nsCidr: string;
  hostCidr?: string;
  master?: string;
}): void {
  sh(["ip", "link", "add", o.hostIf, "type", "veth", "peer", "name", o.peer]);
  sh(["ip", "link", "set", o.peer, "netns", o.ns]);
  const inside = o.nsName ?? o.peer;
  if (inside !== o.peer) sh(["ip", "-n", o.ns, "link", "set", o.peer, "name", inside]);
  sh(["ip", "-n", o.ns, "addr", "add", o.nsCidr, "dev", inside]);
  sh(["ip", "-n", o.ns, "link", "set", inside, "up"]);
  if (o.hostCidr) sh(["ip", "addr", "add", o.hostCidr, "dev", o.hostIf]);
  if (o.master) sh(["ip", "link", "set", o.hostIf, "master", o.master]);
  sh(["ip", "link", "set", o.hostIf, "up"]);
}

/** A shell script removing the namespaces (after killing their processes) and the links of this namespace. */
function teardownScript(namespaces: string[], links: string[]): string {
  return [
    ...namespaces.map((ns) => `for pid in $(ip netns pids ${ns} 2>/dev/null); do kill -KILL $pid 2>/dev/null; done`),
    "sleep 0.2",
    ...namespaces.map((ns) => `ip netns del ${ns} 2>/dev/null`),
    ...links.map((l) => `ip link del ${l} 2>/dev/null`),
    "true",
  ].join("; ");
}

/**
 * Before the namespaces and links are made: removes leftovers of an earlier process with this
 * pid, starts a watchdog that removes them if this process dies without stopping, and returns
 * the stop: `cleanups` (last first), then the namespaces (their processes killed) and links.
 */
export function guardTeardown(
  names: { namespaces: string[]; links: string[] },
  cleanups: Array<() => Promise<void>>,
): () => Promise<void> {
  const teardown = teardownScript(names.namespaces, names.links);
  spawnSync("sh", ["-c", teardown]); // leftovers of an earlier process with this pid
  const watchdog = spawn("sh", ["-c", `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; ${teardown}`], {
    detached: true,
    stdio: "ignore",
  });
  watchdog.unref();
  return async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
    spawnSync("sh", ["-c", teardown]);
    try {
      process.kill(watchdog.pid!, "SIGKILL");
    } catch {}
  };
}
