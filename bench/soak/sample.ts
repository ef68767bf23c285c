// What one sample of the soak reads: each live process's resident set (/proc/<pid>/status VmRSS)
// and open file descriptors (the entries of /proc/<pid>/fd; its keep-alive connections, to the
// provider or from the soak's client, found by socket inode in /proc/<pid>/net/tcp, counted apart), the NATS consumers of the region's
// streams (listed per stream: those that stay apart from those that expire on their own), and the apps' Postgres connections to the region's
// database (pg_stat_activity; the soak's own are left out).
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import type { JetStreamManager } from "@nats-io/jetstream";
import type { Database } from "@pipeline/shared/db";
import { memoryOf } from "../support/processes.ts";

/** One process the soak watches: an incarnation (a restarted gateway is a second one). */
export interface Watched {
  /** `gateway`, `solver-3`, `recovery`, `nats-server`; a second incarnation gets ` #2`. */
  label: string;
  pid: number;
  /** When it was started (ms since the soak began). */
  startedAt: number;
  /** When it was stopped or killed, if it was. */
  stoppedAt?: number;
  alive(): boolean;
}

export interface ProcessFigures {
  rssMb: number;
  /** Open fds, less its keep-alive connections (`pooled`). */
  fds: number;
  /**
   * Its keep-alive TCP connections: a solver's to the provider, the gateway's from the soak's
   * client. Pools that open and close connections as the load moves (a solver's swing by ten in
   * a quiet minute); printed, not judged.
   */
  pooled: number;
  /** Its connections to the region's database (by application_name). */
  pg: number;
}

export interface Sample {
  /** ms since the soak began. */
  at: number;
  procs: Record<string, ProcessFigures>;
  /** Consumers that stay until deleted: the figure judged. */
  consumers: number;
  consumersByStream: Record<string, number>;
  /** Consumers that expire on their own (ConsumerCounts.expiring): printed, not judged. */
  expiringConsumers: number;
  /** The apps' connections, in all and by application_name. */
  pgConnections: number;
  pgByApp: Record<string, number>;
  /** Connections whose application_name is no live process's (a killed solver's that stayed). */
  pgOrphans: number;
  /** The client's counts and the tasks completed in the database, when the sample was taken. */
  tasks?: { offered: number; accepted: number; completed: number };
}

/** The provider's port (solvers connect to it) and the gateway's (the soak's client connects to it). */
export interface PoolPorts {
  provider: number;
  gateway: number;
}

/** Local and remote ports of the TCP sockets in `pid`'s network namespace, by socket inode. */
function socketPorts(pid: number): Map<string, { local: number; remote: number }> {
  const out = new Map<string, { local: number; remote: number }>();
  const port = (address: string) => Number.parseInt(address.split(":")[1]!, 16);
  for (const f of ["tcp", "tcp6"]) {
    let text = "";
    try {
      text = readFileSync(`/proc/${pid}/net/${f}`, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const c = line.trim().split(/\s+/);
      if (c.length > 9) out.set(c[9]!, { local: port(c[1]!), remote: port(c[2]!) });
    }
  }
  return out;
}

/** RSS, fds and keep-alive connections of a live process; undefined once it is gone (a killed one not yet reaped has no VmRSS). */
export function figuresOf(pid: number, ports: PoolPorts): Omit<ProcessFigures, "pg"> | undefined {
  try {
    const links = readdirSync(`/proc/${pid}/fd`).map((fd) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        return "";
      }
    });
    const sockets = socketPorts(pid);
    const pooled = links.filter((l) => {
      const s = sockets.get(/^socket:\[(\d+)\]$/.exec(l)?.[1] ?? "");
      return !!s && (s.remote === ports.provider || s.local === ports.gateway);
    }).length;
    const rss = memoryOf(pid).rssMb;
    return Number.isFinite(rss) ? { rssMb: Math.round(rss * 10) / 10, fds: links.length - pooled, pooled } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The process an application_name belongs to: `gateway`, `recovery`, or a solver's
 * `solver-<WORKER_ID>.<incarnation>[-checkpoint]` (WORKER_ID is the solver's process name).
 */
export const processOfApp = (app: string) => /^solver-(.+)\.[^.]+$/.exec(app.replace(/-checkpoint$/, ""))?.[1] ?? app;

export interface ConsumerCounts {
  /** Consumers that stay until deleted (durable ones, bound push ones), per stream. */
  kept: Record<string, number>;
  /**
   * Ephemeral consumers nobody listens to, with an inactive_threshold: the server removes each on
   * its own once the threshold has passed (what a finished KV key listing leaves behind).
   */
  expiring: number;
}

/** The consumers of every stream of the server (the soak's nats-server serves one region). */
export async function consumerCounts(jsm: JetStreamManager): Promise<ConsumerCounts> {
  const out: ConsumerCounts = { kept: {}, expiring: 0 };
  for await (const s of jsm.streams.list()) {
    if (!s.state.consumer_count) continue;
    for await (const c of jsm.consumers.list(s.config.name)) {
      if (!c.config.durable_name && !c.push_bound && (c.config.inactive_threshold ?? 0) > 0) out.expiring++;
      else out.kept[s.config.name] = (out.kept[s.config.name] ?? 0) + 1;
    }
  }
  return out;
}

/** Connections to `database` by application_name, except the soak's own (`stack`, `soak`). */
export async function pgConnections(db: Database, database: string): Promise<Record<string, number>> {
  const rows = await db.sql<{ app: string; n: number }[]>`
    select application_name as app, count(*)::int as n from pg_stat_activity
    where datname = ${database} and application_name not in ('stack', 'soak')
    group by application_name order by application_name`;
  return Object.fromEntries(rows.map((r) => [r.app, r.n]));
}

/** One sample of every live watched process and of the globals. */
export async function takeSample(
  at: number,
  watched: Watched[],
  g: { jsm: JetStreamManager; db: Database; database: string; ports: PoolPorts },
): Promise<Sample> {
  const [c, pgByApp] = await Promise.all([consumerCounts(g.jsm), pgConnections(g.db, g.database)]);
  const live = new Map<string, ProcessFigures>();
  const procs: Record<string, ProcessFigures> = {};
  for (const w of watched) {
    if (!w.alive()) continue;
    const f = figuresOf(w.pid, g.ports);
    if (!f) continue;
    procs[w.label] = { ...f, pg: 0 };
    live.set(w.label.replace(/ #\d+$/, ""), procs[w.label]!);
  }
  let pgOrphans = 0;
  for (const [app, n] of Object.entries(pgByApp)) {
    const owner = live.get(processOfApp(app));
    if (owner) owner.pg += n;
    else pgOrphans += n;
  }
  return {
    at,
    procs,
    consumers: Object.values(c.kept).reduce((s, n) => s + n, 0),
    consumersByStream: c.kept,
    expiringConsumers: c.expiring,
    pgConnections: Object.values(pgByApp).reduce((s, n) => s + n, 0),
    pgByApp,
    pgOrphans,
  };
}
