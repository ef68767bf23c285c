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
import { spawn, spawnSync } from "node:child_process";
import { runCommand } from "@pipeline/devstack";
import { type RegionStack, type Relay, solverEnv, startRelay } from "@pipeline/devstack/stack";
import { type Proc, spawnApp } from "../harness.ts";

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

/** A command that must succeed (setup and teardown). */
function sh(args: string[]): string {
  const r = spawnSync(args[0]!, args.slice(1), { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${args.join(" ")}: ${(r.stderr || r.stdout).trim()}`);
  return r.stdout;
}

/** A command run while this process's relays and emulator serve: async, so they keep working. */
async function shAsync(args: string[]): Promise<void> {
  const { code, output } = await runCommand(args);
  if (code !== 0) throw new Error(`${args.join(" ")}: ${output.trim()}`);
}

let links = 0;
/** Names from the pid and a per-process count (interface names within 15 characters); a free /30 under 10.200.0.0/14. */
function plan() {
  const tag = `ss${process.pid}n${(links++ % 36).toString(36)}`;
  const used = sh(["ip", "-o", "-4", "addr", "show"]);
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

/** Removes what `plan()` names: the namespace's processes, the namespace, the link (a shell script, for the watchdog too). */
function teardownScript(p: Plan): string {
  return [
    `for pid in $(ip netns pids ${p.ns} 2>/dev/null); do kill -KILL $pid 2>/dev/null; done`,
    "sleep 0.2",
    `ip netns del ${p.ns} 2>/dev/null`,
    `ip link del ${p.hostIf} 2>/dev/null`,
    "true",
  ].join("; ");
}

function buildNetwork(p: Plan): void {
  sh(["ip", "netns", "add", p.ns]);
  sh(["ip", "-n", p.ns, "link", "set", "lo", "up"]);
  sh(["ip", "link", "add", p.hostIf, "type", "veth", "peer", "name", p.nsIf]);
  sh(["ip", "link", "set", p.nsIf, "netns", p.ns]);
  sh(["ip", "-n", p.ns, "addr", "add", `${p.nsIp}/30`, "dev", p.nsIf]);
  sh(["ip", "-n", p.ns, "link", "set", p.nsIf, "up"]);
  sh(["ip", "addr", "add", `${p.hostIp}/30`, "dev", p.hostIf]);
  sh(["ip", "link", "set", p.hostIf, "up"]);
}

/** `url` (a server on 127.0.0.1) as the namespace reaches it: through a relay listening on the host end. */
async function relayed(url: string, hostIp: string, relays: Relay[]): Promise<string> {
  const u = new URL(url);
  const relay = await startRelay({ host: u.hostname, port: Number(u.port) }, { listenHost: hostIp });
  relays.push(relay);
  u.hostname = hostIp;
  u.port = String(relay.port);
  return u.toString().replace(/\/$/, url.endsWith("/") ? "/" : "");
}

export function startNetnsSolverLink(): NetnsSolverLink {
  if (process.getuid?.() !== 0) throw new Error("startNetnsSolverLink needs root (ip netns, veth); CI runs as root");
  const p = plan();
  const teardown = teardownScript(p);
  spawnSync("sh", ["-c", teardown]); // leftovers of an earlier process with this pid
  // If this process dies without stop(), a watchdog removes the namespace and the link.
  const watchdog = spawn("sh", ["-c", `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; ${teardown}`], {
    detached: true,
    stdio: "ignore",
  });
  watchdog.unref();
  const relays: Relay[] = [];
  const stop = async () => {
    for (const r of relays) await r.stop().catch(() => {});
    spawnSync("sh", ["-c", teardown]);
    try {
      process.kill(watchdog.pid!, "SIGKILL");
    } catch {}
  };
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
        env[k] = await relayed(env[k]!, p.hostIp, relays);
      const proc = spawnApp(o.workerId, "apps/solver/src/main.ts", env, o.logDir, ["ip", "netns", "exec", p.ns]);
      region.procs.push(proc);
      return proc;
    },
    cut: () => shAsync(["ip", "link", "set", p.hostIf, "down"]),
    heal: () => shAsync(["ip", "link", "set", p.hostIf, "up"]),
    stop,
  };
}
