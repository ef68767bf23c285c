// One solver of a single-region stack in a network namespace of its own (root only; CI runs as
// root), for tests/silent-solver.test.ts: a solver that stays alive while its host's network is
// cut. The namespace `ss<pid>n<k>` is joined to this (root) namespace by a veth pair (a /30); on
// its host end, TCP relays of this process lead to the stack's nats-server, Postgres and the
// provider emulator (which listen on 127.0.0.1 only). `cut()` sets the host end down: the
// solver's packets vanish, its TCP connections stall, nothing is closed on either side (the
// relays keep their connections to the servers, so its Postgres sessions stay open), exactly a
// cable pulled between the solver's host and the rest. `heal()` sets it up again.
//
//   this process (root namespace): emulator, relays on ss<pid>n<k>h, the test
//     │ veth /30 (host end ss<pid>n<k>h: the one cut)
//   ┌─┴──────────────────────────┐
//   │ ns ss<pid>n<k>: one solver │
//   └────────────────────────────┘
//
// `stop()` removes the namespace (killing what runs in it), the link and the relays; a watchdog
// does the same if this process dies without stopping.
import { type RegionStack, solverEnv, startRelay } from "@pipeline/devstack/stack";
import { type Proc, spawnApp } from "../harness.ts";
import { addNamespace, addVeth, guardTeardown, shAsync, usedAddresses } from "./netns.ts";

export interface NetnsSolverLink {
  /** The namespace (`ss<pid>n<k>`). */
  ns: string;
  /** The veth's end in the root namespace, the one `cut` sets down. */
  hostIf: string;
  hostIp: string;
  nsIp: string;
  /** Starts a solver of `region` inside the namespace; it joins the region's processes (stopped with the stack). */
  spawnSolver(
    region: RegionStack,
    o: { workerId: string; logDir: string; env?: Record<string, string> },
  ): Promise<Proc>;
  /** `ip link set <hostIf> down`: the solver's connections stall, its process keeps running. */
  cut(): Promise<void>;
  heal(): Promise<void>;
  stop(): Promise<void>;
}

let links = 0;
/** Names from the pid and a per-process count (interface names within 15 characters); a free /30 under 10.200.0.0/14. */
function plan() {
  const tag = `ss${process.pid}n${(links++ % 36).toString(36)}`;
  const used = usedAddresses();
  let idx = (process.pid * 7) % 65536;
  for (let i = 0; i < 65536; i++, idx = (idx + 1) % 65536) {
    const base = `10.${200 + (idx >> 14)}.${(idx >> 6) & 255}.${(idx & 63) * 4}`;
    const [a, b, c, d] = base.split(".").map(Number) as [number, number, number, number];
    const hostIp = `${a}.${b}.${c}.${d + 1}`;
    const nsIp = `${a}.${b}.${c}.${d + 2}`;
    if (!used.includes(` ${hostIp}/`) && !used.includes(` ${nsIp}/`))
      return { ns: tag, hostIf: `${tag}h`, nsIf: `${tag}v`, hostIp, nsIp };
  }
  throw new Error("no free /30 under 10.200.0.0/14");
}
type Plan = ReturnType<typeof plan>;

function buildNetwork(p: Plan): void {
  addNamespace(p.ns);
  addVeth({ hostIf: p.hostIf, peer: p.nsIf, ns: p.ns, nsCidr: `${p.nsIp}/30`, hostCidr: `${p.hostIp}/30` });
}

/** `url` (a server on 127.0.0.1) as the namespace reaches it: through a relay listening on the host end. */
async function relayed(url: string, hostIp: string, cleanups: Array<() => Promise<void>>): Promise<string> {
  const u = new URL(url);
  const relay = await startRelay({ host: u.hostname, port: Number(u.port) }, { listenHost: hostIp });
  cleanups.push(() => relay.stop());
  u.hostname = hostIp;
  u.port = String(relay.port);
  return u.toString().replace(/\/$/, url.endsWith("/") ? "/" : "");
}

export function startNetnsSolverLink(): NetnsSolverLink {
  if (process.getuid?.() !== 0) throw new Error("startNetnsSolverLink needs root (ip netns, veth); CI runs as root");
  const p = plan();
  // The relays' stops, then the namespace and the link (by a watchdog if this process dies first).
  const cleanups: Array<() => Promise<void>> = [];
  const stop = guardTeardown({ namespaces: [p.ns], links: [p.hostIf] }, cleanups);
  try {
    buildNetwork(p);
  } catch (err) {
    void stop();
    throw err;
  }
  return {
    ns: p.ns,
    hostIf: p.hostIf,
    hostIp: p.hostIp,
    nsIp: p.nsIp,
    async spawnSolver(region, o) {
      const env = { ...solverEnv(region.wiring, { workerId: o.workerId }), ...o.env };
      for (const k of ["NATS_URL", "DATABASE_URL", "PROVIDER_URL"] as const)
        env[k] = await relayed(env[k]!, p.hostIp, cleanups);
      const proc = spawnApp(o.workerId, "apps/solver/src/main.ts", env, o.logDir, ["ip", "netns", "exec", p.ns]);
      region.procs.push(proc);
      return proc;
    },
    cut: () => shAsync(["ip", "link", "set", p.hostIf, "down"]),
    heal: () => shAsync(["ip", "link", "set", p.hostIf, "up"]),
    stop,
  };
}
