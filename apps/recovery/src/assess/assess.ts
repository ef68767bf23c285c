// `assess`: one look at everything an operator needs at 3 a.m. The probes (probes.ts) read NATS,
// Postgres, the snapshots, the provider and the buckets; the checks (checks.ts) turn what they read
// into verdicts; this file composes them and renders the screen.
import type { JetStreamManager } from "@nats-io/jetstream";
import type { Heartbeat } from "@pipeline/shared/kv";
import type { NatsConnection } from "@pipeline/shared/nats";
import type postgres from "postgres";
import type { RecoveryConfig } from "../config.ts";
import { lanesStatus } from "../lanes/control.ts";
import { readAccountFigures } from "../money/figures.ts";
import { balanceCheck, type Forecast, forecastBalance } from "../money/forecast.ts";
import { redactUrl } from "../redact-url.ts";
import {
  natsChecks,
  newestSnapshot,
  offHostCheck,
  overallLevel,
  postgresChecks,
  providerCheck,
  regionsUnreadable,
  snapshotCheck,
  workersChecks,
} from "./checks.ts";
import { concurrencyChecks } from "./concurrency.ts";
import { eventsCheck, probeEventsSizing } from "./events-sizing.ts";
import { laneChecks } from "./lanes.ts";
import type { Assessment, Check } from "./model.ts";
import {
  openHandles,
  probeJetStream,
  probePostgres,
  probeProvider,
  probeRegionState,
  probeSnapshots,
  probeWorkers,
} from "./probes.ts";
import { regionChecks } from "./regions.ts";

export type { Assessment, Check, LaneInfo, Level } from "./model.ts";
export { providerBalance } from "./probes.ts";

export interface AssessDeps {
  region: string;
  jsm: JetStreamManager | Error;
  sql: postgres.Sql | Error;
  snapshotDir: string;
  snapshotMaxAgeMs: number;
  /** SNAPSHOT_INTERVAL_MS: with it, EVENTS is sized against the snapshots (line `events`). */
  snapshotIntervalMs?: number;
  staleAfterMs: number;
  provider: { url: string; key: string | undefined; timeoutMs: number };
  /** The NATS server the CLI is connected to (its version from the INFO it sent). */
  natsServer?: { version: string; url: string };
  /** Two regions: the lease and mirror checks (regions.ts). */
  regionChecks?: Check[];
  /** Live solvers from their heartbeats (an Error when the bucket cannot be read). */
  workers?: Heartbeat[] | Error;
  /** Where snapshots are copied off the host (SNAPSHOT_OFFHOST); undefined = copies are off. */
  offHostDomain?: string;
  /** BALANCE_HOURS_WARN: the `balance` line warns under this many hours left. */
  balanceWarnHours?: number;
}

/** How old the newest balance sample may be before `assess` calls it stale. */
const BALANCE_STALE_MS = 15 * 60_000;

/** Each account's forecast from the ledger and the balance samples (an Error when unreadable). */
async function probeBalances(sql: postgres.Sql): Promise<Forecast[] | Error> {
  try {
    return (await readAccountFigures(sql)).map(forecastBalance);
  } catch (err) {
    return err as Error;
  }
}

/**
 * One look at everything an operator needs at 3 a.m. Each probe is independent: NATS down still
 * shows the database, and the other way round. `level` is `fail` when something needs a human.
 */
export async function assess(d: AssessDeps): Promise<Assessment> {
  const at = new Date().toISOString();
  const nats = d.jsm instanceof Error ? d.jsm : await probeJetStream(d.jsm, d.region);
  const pg = d.sql instanceof Error ? d.sql : await probePostgres(d.sql, d.staleAfterMs);
  const snapshots = probeSnapshots(d.snapshotDir, d.offHostDomain);
  const provider = await probeProvider(d.provider);
  const balances = d.sql instanceof Error ? undefined : await probeBalances(d.sql);
  const lanes =
    d.jsm instanceof Error ? undefined : await lanesStatus({ jsm: d.jsm, region: d.region }).catch((e: Error) => e);
  const sizing =
    d.jsm instanceof Error || d.snapshotIntervalMs === undefined
      ? undefined
      : await probeEventsSizing(d.jsm, {
          region: d.region,
          snapshotDir: d.snapshotDir,
          snapshotIntervalMs: d.snapshotIntervalMs,
          snapshotMaxAgeMs: d.snapshotMaxAgeMs,
        }).catch(() => undefined);
  const checks: Check[] = [
    ...natsChecks(nats, d.natsServer),
    ...(sizing ? [eventsCheck(sizing)] : []),
    ...(d.regionChecks ?? []),
    ...(lanes ? laneChecks(lanes) : []),
    ...postgresChecks(pg, d.staleAfterMs),
    snapshotCheck(snapshots, d.snapshotMaxAgeMs),
    ...[offHostCheck(snapshots, d.snapshotMaxAgeMs, d.offHostDomain)].filter((c) => c !== undefined),
    providerCheck(provider),
    ...(balances
      ? [balanceCheck(balances, { warnHours: d.balanceWarnHours ?? 6, staleMs: BALANCE_STALE_MS }, Date.now())]
      : []),
    ...workersChecks(d.workers),
    ...(Array.isArray(d.workers) ? concurrencyChecks(d.workers) : []),
  ];
  const js = nats instanceof Error ? undefined : nats;
  return {
    at,
    region: d.region,
    level: overallLevel(checks),
    checks,
    queue: js?.queue ?? null,
    dlq: js?.dlq ?? null,
    tasks: pg instanceof Error ? null : pg.tasks,
    snapshot: newestSnapshot(snapshots),
    provider,
    breaker: js?.breaker ?? null,
    workers: Array.isArray(d.workers) ? d.workers : null,
    balances: Array.isArray(balances) ? balances : null,
  };
}

/**
 * `recovery assess` from the configuration: connects to NATS (through `connect`, bounded by the
 * caller) and Postgres independently, reads the workers and, with several regions, the region
 * state, assesses, and closes what it opened.
 */
export async function assessLive(config: RecoveryConfig, connect: () => Promise<NatsConnection>): Promise<Assessment> {
  const h = await openHandles(config, connect);
  try {
    const { nc, jsm } = h;
    const workers = nc instanceof Error ? undefined : await probeWorkers(nc, config.REGION);
    const remotes = config.regions.filter((r) => r !== config.REGION);
    const region =
      remotes.length && !(nc instanceof Error) && !(jsm instanceof Error)
        ? await probeRegionState(nc, jsm, config.REGION, remotes, h.sql instanceof Error ? undefined : h.sql)
        : undefined;
    return await assess({
      ...(workers ? { workers } : {}),
      ...(region ? { regionChecks: region instanceof Error ? [regionsUnreadable(region)] : regionChecks(region) } : {}),
      ...(nc instanceof Error || !nc.info
        ? {}
        : { natsServer: { version: nc.info.version, url: redactUrl(config.NATS_URL) } }),
      region: config.REGION,
      jsm,
      sql: h.sql,
      snapshotDir: config.SNAPSHOT_DIR,
      snapshotMaxAgeMs: config.SNAPSHOT_MAX_AGE_MS,
      snapshotIntervalMs: config.SNAPSHOT_INTERVAL_MS,
      ...(config.offHostDomain ? { offHostDomain: config.offHostDomain } : {}),
      staleAfterMs: config.STALE_AFTER_MS,
      balanceWarnHours: config.BALANCE_HOURS_WARN,
      provider: { url: config.PROVIDER_URL, key: config.PROVIDER_KEY, timeoutMs: config.PROVIDER_TIMEOUT_MS },
    });
  } finally {
    await h.close();
  }
}

/** The screen: one line per check, worst first, then the lanes. */
export function renderAssessment(a: Assessment): string {
  const mark = { ok: "ok  ", warn: "WARN", fail: "FAIL" } as const;
  const order = { fail: 0, warn: 1, ok: 2 } as const;
  const lines = [
    `recovery assess: region ${a.region} at ${a.at}: ${a.level === "ok" ? "all good" : a.level === "warn" ? "look when you can" : "NEEDS A HUMAN"}`,
    "",
  ];
  for (const c of [...a.checks].sort((x, y) => order[x.level] - order[y.level])) {
    lines.push(`  ${mark[c.level]}  ${c.name.padEnd(9)} ${c.summary}`);
    if (c.hint && c.level !== "ok") lines.push(`        ${"".padEnd(9)} -> ${c.hint}`);
  }
  if (a.queue?.lanes.length) {
    lines.push("", "  lane consumer                     lag(pending)  in-flight  redelivered  waiting-pulls");
    for (const l of a.queue.lanes)
      lines.push(
        `  ${l.consumer.padEnd(34)}${String(l.pending).padStart(12)}${String(l.ackPending).padStart(11)}${String(l.redelivered).padStart(13)}${String(l.waitingPulls).padStart(15)}`,
      );
  }
  return lines.join("\n");
}
