// The rehearsal's private network: one bridge on the host (rh-br0, 10.77.0.1/16) that every
// container's veth joins (systemd-nspawn --network-bridge). The hosts reach each other and the
// host over it; the host's side is "the internet" of the hosts (the provider emulator, the
// nats-server tarball). Nothing is routed or masqueraded beyond it.
import { BRIDGE, BRIDGE_IP, PREFIX } from "./config.ts";
import { check, type Log, run } from "./exec.ts";

export const bridgeExists = () => run(["ip", "link", "show", "dev", BRIDGE]).code === 0;

export function createBridge(log: Log): void {
  if (!bridgeExists()) {
    check(["ip", "link", "add", BRIDGE, "type", "bridge"]);
    log(`bridge ${BRIDGE} made`);
  }
  const addrs = check(["ip", "-4", "-o", "addr", "show", "dev", BRIDGE]);
  if (!addrs.includes(`${BRIDGE_IP}/${PREFIX}`)) check(["ip", "addr", "add", `${BRIDGE_IP}/${PREFIX}`, "dev", BRIDGE]);
  check(["ip", "link", "set", BRIDGE, "up"]);
}

/** Removes the bridge and any veth of ours still attached to it (a container that died uncleanly). */
export function removeBridge(log: Log): void {
  if (!bridgeExists()) return;
  const ports = run(["ip", "-o", "link", "show", "master", BRIDGE]).stdout;
  for (const m of ports.matchAll(/^\d+:\s+([^:@\s]+)/gm)) run(["ip", "link", "del", m[1]!]);
  check(["ip", "link", "del", BRIDGE]);
  log(`bridge ${BRIDGE} removed`);
}

/** The veths attached to the bridge (host side), for `status`. */
export function bridgePorts(): string[] {
  return [...run(["ip", "-o", "link", "show", "master", BRIDGE]).stdout.matchAll(/^\d+:\s+([^:@\s]+)/gm)].map(
    (m) => m[1]!,
  );
}
