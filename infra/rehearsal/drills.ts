// `npm run rehearse -- drills`: on a fleet that is up, faults injected at once on real hosts, and
// the pages they must raise at the alert receiver (Alertmanager's webhook, Slack's JSON) within
// 2 minutes; one `alert <name> after S s` line per drill, then every fault undone.
// Each fault is on its own host: HostDown holds back the other alerts of its host (alertmanager-config.ts).
import type { HostSpec } from "./config.ts";
import type { Log } from "./exec.ts";
import { inMachine } from "./machine.ts";
import { markAlerts, waitForAlert } from "./monitoring.ts";
import type { State } from "./state.ts";

export interface Drill {
  alert: string;
  /** The host (by name) and the shell line that makes the fault, then the one that undoes it. */
  host: string;
  fault: string;
  undo: string;
}

/** The drills of one region's fleet: an app unit, a host's node exporter, a NATS server, Postgres. */
export function drillsOf(hosts: HostSpec[]): Drill[] {
  const one = (role: string, i = 0) => {
    const h = hosts.filter((x) => x.role === role)[i];
    if (!h) throw new Error(`no ${role} host ${i + 1} in the fleet`);
    return h.name;
  };
  return [
    {
      alert: "AppDown",
      host: one("app"),
      fault: "systemctl stop solver@v1.service",
      undo: "systemctl start solver@v1.service",
    },
    {
      alert: "HostDown",
      host: one("nats", 1),
      fault: "systemctl stop prometheus-node-exporter.service",
      undo: "systemctl start prometheus-node-exporter.service",
    },
    {
      alert: "NatsDown",
      host: one("nats", 2),
      fault: "systemctl stop nats-server.service",
      undo: "systemctl start nats-server.service",
    },
    {
      alert: "PostgresDown",
      host: one("postgres"),
      fault: "systemctl stop postgresql.service",
      undo: "systemctl start postgresql.service",
    },
  ];
}

export interface DrillResult {
  alert: string;
  host: string;
  afterMs?: number;
  error?: string;
}

/** Every drill at once; each alert awaited (timeoutMs), then every fault undone, whatever happened. */
export async function runDrills(state: State, log: Log, timeoutMs = 120_000): Promise<DrillResult[]> {
  const drills = drillsOf(state.hosts);
  const hostOf = (name: string) => state.hosts.find((h) => h.name === name)!;
  const from = await markAlerts();
  try {
    for (const d of drills) {
      const r = inMachine(hostOf(d.host), d.fault);
      if (r.code !== 0) throw new Error(`${d.host}: ${d.fault} failed: ${r.stderr.trim()}`);
      log(`${d.host}: ${d.fault}`);
    }
    return await Promise.all(
      drills.map(async (d): Promise<DrillResult> => {
        try {
          const a = await waitForAlert(d.alert, from, timeoutMs);
          log(`alert ${d.alert} after ${(a.afterMs / 1000).toFixed(1)} s (${d.host})`);
          return { alert: d.alert, host: d.host, afterMs: a.afterMs };
        } catch (err) {
          return { alert: d.alert, host: d.host, error: (err as Error).message };
        }
      }),
    );
  } finally {
    for (const d of drills) {
      const r = inMachine(hostOf(d.host), d.undo);
      log(`${d.host}: ${d.undo}${r.code === 0 ? "" : ` failed: ${r.stderr.trim()}`}`);
    }
  }
}
