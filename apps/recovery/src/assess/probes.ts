// What `assess` reads: NATS (TASKS, its consumers, the DLQ, the last breaker event), Postgres
// (tasks by state, stuck and stale rows), the snapshot directory, the provider's balance, and the
// workers and region buckets. Each probe keeps what it read before an error, so the verdicts
// (checks.ts) show as much as could be seen.
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { type Database, openDatabase } from "@pipeline/shared/db";
import { type Heartbeat, liveWorkers, openRegionBucket, openWorkersBucket } from "@pipeline/shared/kv";
import type { NatsConnection } from "@pipeline/shared/nats";
import { parseProviderReply } from "@pipeline/shared/provider";
import { eventSubject, streams } from "@pipeline/shared/subjects";
import type postgres from "postgres";
import type { RecoveryConfig } from "../config.ts";
import { redactUrl } from "../redact-url.ts";
import { listSnapshots, type Snapshot } from "../snapshot/manifest.ts";
import { offHostRecord } from "../snapshot/offhost.ts";
import type { Assessment, LaneInfo, TaskFigures } from "./model.ts";
import { probeRegions, type RegionsProbe } from "./regions.ts";

/** TASKS, the DLQ and the breaker as far as they were read; `error` is the JetStream error that stopped the probe. */
export interface JetStreamProbe {
  queue: NonNullable<Assessment["queue"]> | null;
  dlq: Assessment["dlq"];
  breaker: Assessment["breaker"];
  error: string | null;
}

/** The region's TASKS stream: missing, or its message count and one lane per consumer (sorted). */
async function probeQueue(jsm: JetStreamManager, region: string): Promise<NonNullable<Assessment["queue"]>> {
  const name = streams.tasks(region);
  const info = await jsm.streams.info(name).catch((err: Error) => {
    if (/not found/i.test(err.message)) return undefined;
    throw err;
  });
  if (!info) return { stream: name, exists: false, messages: 0, lanes: [] };
  const lanes: LaneInfo[] = [];
  for await (const c of jsm.consumers.list(name)) {
    lanes.push({
      consumer: c.name,
      filter: c.config.filter_subject ?? "",
      pending: c.num_pending,
      ackPending: c.num_ack_pending,
      redelivered: c.num_redelivered,
      waitingPulls: c.num_waiting,
    });
  }
  lanes.sort((a, b) => a.consumer.localeCompare(b.consumer));
  return { stream: name, exists: true, messages: info.state.messages, lanes };
}

/** The last breaker event in EVENTS, or null when there is none. */
async function probeBreaker(jsm: JetStreamManager, region: string): Promise<Assessment["breaker"]> {
  const last = await jsm.streams
    .getMessage(streams.events(region), { last_by_subj: eventSubject(region, "breaker") })
    .catch(() => null);
  if (!last) return null;
  const b = last.json() as { at?: string; data?: { state?: string; reason?: string | null; worker?: string } };
  return {
    state: b.data?.state ?? "unknown",
    reason: b.data?.reason ?? null,
    worker: b.data?.worker ?? null,
    at: b.at ?? last.time.toISOString(),
  };
}

/** The queue, then the DLQ (absent counts as empty), then the breaker; stops at the first JetStream error. */
export async function probeJetStream(jsm: JetStreamManager, region: string): Promise<JetStreamProbe> {
  const p: JetStreamProbe = { queue: null, dlq: null, breaker: null, error: null };
  try {
    p.queue = await probeQueue(jsm, region);
    const dlq = await jsm.streams.info(streams.dlq(region)).catch(() => undefined);
    p.dlq = { stream: streams.dlq(region), messages: dlq?.state.messages ?? 0 };
    p.breaker = await probeBreaker(jsm, region);
  } catch (err) {
    p.error = (err as Error).message;
  }
  return p;
}

/** The server's version, the task figures, and the query error that stopped the probe (if any). */
export interface PostgresProbe {
  /** null until the version query answered; its `version` is null when it returned no row. */
  server: { version: string | null } | null;
  tasks: TaskFigures | null;
  /** Solving rows whose lease expired more than STALE_AFTER_MS ago (a `fail`, not a `warn`). */
  stuckOld: number;
  error: string | null;
}

/** Tasks by state, solving rows with an expired lease, queued/retrying rows not updated for `staleAfterMs`. */
export async function probePostgres(sql: postgres.Sql, staleAfterMs: number): Promise<PostgresProbe> {
  const p: PostgresProbe = { server: null, tasks: null, stuckOld: 0, error: null };
  try {
    const [v] = await sql<{ v: string }[]>`select current_setting('server_version') as v`;
    p.server = { version: v?.v ?? null };
    const states = await sql<
      { state: string; n: number }[]
    >`select state, count(*)::int as n from tasks group by state`;
    const stale = `${staleAfterMs} milliseconds`;
    const [s] = await sql<
      {
        stuck: number;
        stuck_old: number;
        oldest_stuck: number | null;
        stale_queued: number;
        oldest_queued: number | null;
      }[]
    >`
        select
          count(*) filter (where state = 'solving' and (lease_until is null or lease_until < now()))::int as stuck,
          count(*) filter (where state = 'solving' and (lease_until is null or lease_until < now() - ${stale}::interval))::int as stuck_old,
          extract(epoch from now() - min(updated_at) filter (where state = 'solving' and (lease_until is null or lease_until < now())))::float8 as oldest_stuck,
          count(*) filter (where state in ('queued', 'retrying') and updated_at < now() - ${stale}::interval
            and (start_at is null or start_at < now() - ${stale}::interval))::int as stale_queued,
          -- A scheduled task (docs/scheduling.md) is waiting from its start, not from its acceptance.
          extract(epoch from now() - min(coalesce(start_at, created_at)) filter (where state = 'queued' and (start_at is null or start_at <= now())))::float8 as oldest_queued
        from tasks where state in ('queued', 'solving', 'retrying')`;
    p.tasks = {
      byState: Object.fromEntries(states.map((r) => [r.state, r.n])),
      stuckSolving: s?.stuck ?? 0,
      oldestStuckSolvingSec: s?.oldest_stuck ?? null,
      staleQueued: s?.stale_queued ?? 0,
      oldestQueuedSec: s?.oldest_queued ?? null,
    };
    p.stuckOld = s?.stuck_old ?? 0;
  } catch (err) {
    p.error = (err as Error).message;
  }
  return p;
}

export interface SnapshotsProbe {
  dir: string;
  /** Newest first. */
  snapshots: Snapshot[];
  /** The newest snapshot with a verified off-host copy (only looked for when copies are on). */
  copied: Snapshot | undefined;
  now: number;
}

/** The snapshots in `dir` and, when copies go to `offHostDomain`, the newest one copied. */
export function probeSnapshots(dir: string, offHostDomain: string | undefined): SnapshotsProbe {
  const snapshots = listSnapshots(dir);
  return {
    dir,
    snapshots,
    copied: offHostDomain ? snapshots.find((s) => offHostRecord(s)) : undefined,
    now: Date.now(),
  };
}

/** Asks the provider for the balance (`res.php`, action=getbalance, key in the POST body). */
export async function providerBalance(
  url: string,
  key: string,
  timeoutMs: number,
): Promise<{ reachable: boolean; balance: string | null; error: string | null }> {
  try {
    const res = await fetch(`${url.replace(/\/+$/, "")}/res.php`, {
      method: "POST",
      body: new URLSearchParams({ key, action: "getbalance", json: "1" }),
      headers: { "content-type": "application/x-www-form-urlencoded" },
      signal: AbortSignal.timeout(timeoutMs),
    });
    const r = parseProviderReply(res.status, await res.text());
    if (r.kind === "ok") return { reachable: true, balance: r.value, error: null };
    if (r.kind === "error") return { reachable: true, balance: null, error: r.code };
    return {
      reachable: r.kind !== "transport",
      balance: null,
      error: r.kind === "transport" ? r.reason : "unexpected reply",
    };
  } catch (err) {
    return {
      reachable: false,
      balance: null,
      error: (err as Error).name === "TimeoutError" ? "timeout" : `network: ${(err as Error).message}`,
    };
  }
}

/** The provider's balance; null when there is no key to ask with. */
export async function probeProvider(provider: {
  url: string;
  key: string | undefined;
  timeoutMs: number;
}): Promise<Assessment["provider"]> {
  if (!provider.key) return null;
  const r = await providerBalance(provider.url, provider.key, provider.timeoutMs);
  return { url: redactUrl(provider.url), ...r, ...(r.error ? { error: redactUrl(r.error) } : {}) };
}

/** The handles the CLI's `assess` probes through; each an Error when it could not be had. */
export interface LiveHandles {
  nc: NatsConnection | Error;
  jsm: JetStreamManager | Error;
  sql: postgres.Sql | Error;
  close(): Promise<void>;
}

/** Connects to NATS (through `connect`) and Postgres independently: one down still lets the other be read. */
export async function openHandles(
  config: RecoveryConfig,
  connect: () => Promise<NatsConnection>,
): Promise<LiveHandles> {
  const nc = await connect().catch((e: Error) => e);
  const jsm = nc instanceof Error ? nc : await jetstreamManager(nc).catch((e: Error) => e);
  const database: Database | undefined = config.DATABASE_URL
    ? openDatabase(config.DATABASE_URL, { max: 2, appName: "recovery-assess" })
    : undefined;
  const sql = database
    ? await database.sql`select 1`.then(() => database.sql).catch((e: Error) => e)
    : new Error("DATABASE_URL is not set");
  return {
    nc,
    jsm,
    sql,
    async close() {
      if (!(nc instanceof Error)) await nc.close();
      await database?.close();
    },
  };
}

/** The live solvers from their heartbeats; an Error when the bucket cannot be read. */
export function probeWorkers(nc: NatsConnection, region: string): Promise<Heartbeat[] | Error> {
  return openWorkersBucket(nc, region)
    .then((kv) => liveWorkers(kv))
    .then((w) => w.workers)
    .catch((e: Error) => e);
}

/** The lease and the mirrors of the other regions; an Error when the region bucket cannot be read. */
export function probeRegionState(
  nc: NatsConnection,
  jsm: JetStreamManager,
  region: string,
  remotes: string[],
  sql?: postgres.Sql,
): Promise<RegionsProbe | Error> {
  return openRegionBucket(nc, region)
    .then((kv) => probeRegions(jsm, kv, region, remotes, sql))
    .catch((e: Error) => e);
}
