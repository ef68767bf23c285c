import { jetstream } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { RECONNECT } from "@pipeline/shared/db";
import { openRegionBucket } from "@pipeline/shared/kv";
import type { Logger } from "@pipeline/shared/log";
import { connectNats, type NatsConnection, natsAuthFromEnv } from "@pipeline/shared/nats";
import { provisionRegion } from "@pipeline/shared/provision";
import { buckets } from "@pipeline/shared/subjects";
import postgres from "postgres";
import { probeEventsSizing } from "./assess/events-sizing.ts";
import { probeRegions } from "./assess/regions.ts";
import type { RecoveryConfig } from "./config.ts";
import { startConsole } from "./console/server.ts";
import { openContext, type RecoveryContext } from "./context.ts";
import { adoptAndRecord, INCIDENT_TICK_MS, incidentJob } from "./incidents/job.ts";
import type { Observation } from "./incidents/model.ts";
import { enforceLanes, lanesStatus } from "./lanes/control.ts";
import { regionGauges } from "./metrics/region-gauges.ts";
import { createRecoveryMetrics, type RecoveryMetrics } from "./metrics/registry.ts";
import { readAccountFigures } from "./money/figures.ts";
import { forecastBalance } from "./money/forecast.ts";
import { runReconcile } from "./money/run-reconcile.ts";
import { breakerStormNotification, leaseNotification } from "./notify/messages.ts";
import { openNotifier, startNotifyWatches } from "./notify/notifications.ts";
import { type LeaseEvent, type LeaseKeeper, startLeaseKeeper } from "./regions/lease-keeper.ts";
import { createPlanKeeper } from "./regions/plan-keeper.ts";
import { startReplicator } from "./regions/replicator.ts";
import { retentionPolicy } from "./retention/policy.ts";
import { runRetention } from "./retention/retention.ts";
import { copySnapshotOffHost, offHostBucket } from "./snapshot/offhost.ts";
import { takeSnapshot } from "./snapshot/take-snapshot.ts";
import { recoverStale } from "./sweep/recover-stale.ts";

export interface RecoveryService {
  /** Waits for a sweep or snapshot in progress, then closes NATS and Postgres. */
  stop(): Promise<void>;
}

/** How often the lane consumers are checked against their lanes' pause records. */
const LANE_ENFORCE_MS = 5000;

/** Jobs on timers: a run never overlaps itself; a failed run is logged and the next one tried on schedule. */
function jobs(log: Logger) {
  const running = new Set<Promise<unknown>>();
  const timers: Array<ReturnType<typeof setInterval>> = [];
  /** Runs `job` now and every `ms` (0 or less: never). */
  const every = (ms: number, name: string, job: () => Promise<unknown>) => {
    if (ms <= 0) return;
    let busy = false;
    const tick = () => {
      if (busy) return;
      busy = true;
      const p = job()
        .catch((err: Error) => log.error({ job: name, err: err.message }, `${name} failed`))
        .finally(() => {
          busy = false;
          running.delete(p);
        });
      running.add(p);
    };
    timers.push(setInterval(tick, ms));
    tick();
  };
  return {
    every,
    /** No more runs. */
    clear: () => timers.forEach((t) => clearInterval(t)),
    /** Waits for the runs in progress. */
    settled: () => Promise.allSettled([...running]),
  };
}

/**
 * The region lease (several regions only): connects to the witness, creates its leases bucket
 * (retried while out of reach: the region stays fenced meanwhile, and a keeper that gave up would
 * leave it fenced for good), then starts the keeper. `stopping()` ends the attempts.
 */
function startKeeperAtWitness(
  config: RecoveryConfig,
  ctx: RecoveryContext,
  remotes: string[],
  replicaSql: postgres.Sql,
  log: Logger,
  stopping: () => boolean,
  onEvent?: (e: LeaseEvent) => void,
) {
  let keeper: LeaseKeeper | undefined;
  let witnessNc: NatsConnection | undefined;
  const started = (async () => {
    const auth = natsAuthFromEnv({
      NATS_USER: config.WITNESS_USER,
      NATS_PASSWORD: config.WITNESS_PASSWORD,
      NATS_CREDS: config.WITNESS_CREDS,
    });
    // A witness node on the far side of a cut must be left within seconds, not after the client's
    // default 2 x 2 min of unanswered pings: the lease is renewed through another node of the list.
    witnessNc = await connectNats(
      config.WITNESS_URL!,
      `recovery-${config.REGION}-witness`,
      auth,
      (e) => log.error({ err: e.message }, "witness nats error"),
      { pingIntervalMs: 2000, maxPingOut: 2 },
    );
    if (stopping()) return;
    // Short requests: a round must fail fast when the witness is out of reach.
    const kvm = new Kvm(jetstream(witnessNc, { timeout: 1000 }));
    let witness: Awaited<ReturnType<Kvm["create"]>> | undefined;
    for (let attempt = 1; !witness; attempt++) {
      try {
        witness = await kvm.create(buckets.leases(), { history: 1, replicas: config.WITNESS_REPLICAS });
      } catch (err) {
        if (stopping()) return;
        log.warn(
          { err: (err as Error).message, attempt },
          "witness leases bucket not reachable yet: the lease keeper retries (this region stays fenced meanwhile)",
        );
        await Bun.sleep(Math.min(5000, 250 * 2 ** Math.min(attempt, 5)));
      }
    }
    if (stopping()) return;
    keeper = startLeaseKeeper({
      witness,
      local: await openRegionBucket(ctx.nc, config.REGION),
      region: config.REGION,
      remotes,
      timing: { ttlMs: config.LEASE_TTL_MS, marginMs: config.LEASE_MARGIN_MS },
      renewMs: config.LEASE_RENEW_MS,
      log,
      uncertainMs: config.ADOPT_UNCERTAIN_MS,
      ...(onEvent ? { onEvent } : {}),
      plan: {
        keeper: createPlanKeeper({
          sql: replicaSql,
          witness,
          region: config.REGION,
          markerMs: config.PLAN_MARKER_MS,
          log,
        }),
        releaseMs: config.PLAN_RELEASE_MS,
      },
      // adoptRegion, each phase also recording the failover incident (incidents/job.ts).
      adopt: adoptAndRecord(config, ctx, replicaSql, log),
    });
  })().catch((err: Error) => log.error({ err: err.message }, "lease keeper did not start"));
  return {
    started,
    async stop() {
      await keeper?.stop();
      await witnessNc?.close().catch(() => {});
    },
  };
}

/**
 * Each snapshot is copied off the host right after it is taken (another region's Object Store),
 * read back and checked; a failed copy is logged and counted, the local snapshot stays.
 */
async function snapshotAndCopy(
  config: RecoveryConfig,
  ctx: RecoveryContext,
  metrics: RecoveryMetrics,
  log: Logger,
): Promise<void> {
  const s = await takeSnapshot({
    databaseUrl: config.DATABASE_URL!,
    dir: config.SNAPSHOT_DIR,
    keep: config.SNAPSHOT_KEEP,
    region: config.REGION,
    jsm: ctx.jsm,
    log,
  });
  if (!config.offHostDomain) return;
  try {
    const c = await copySnapshotOffHost(
      { nc: ctx.nc, domain: config.offHostDomain, bucket: offHostBucket(config.REGION) },
      s,
      config.SNAPSHOT_OFFHOST_KEEP ?? config.SNAPSHOT_KEEP,
    );
    metrics.offhost.copy("ok", c.bytes);
    log.info(
      { snapshot: c.snapshot, domain: c.domain, bucket: c.bucket, bytes: c.bytes, ms: c.copyMs },
      "snapshot copied off the host and verified",
    );
  } catch (err) {
    metrics.offhost.copy("error", 0);
    log.error(
      { snapshot: s.manifest.name, domain: config.offHostDomain, err: (err as Error).message },
      "off-host snapshot copy failed",
    );
  }
}

/** At start: a warning when EVENTS' limits cannot hold what a restore needs at the measured rate (docs/runbook.md, Sizing EVENTS). */
async function warnOnEventsSizing(size: () => ReturnType<typeof probeEventsSizing>, log: Logger): Promise<void> {
  try {
    const s = await size();
    if (s.level !== "ok")
      log.warn(
        {
          holdsSec: Number.isFinite(s.holdsMs) ? Math.round(s.holdsMs / 1000) : null,
          needSec: Math.round(s.needMs / 1000),
          lostAfterSnapshot: s.lostAfterSnapshot,
        },
        `EVENTS sizing: ${s.summary}`,
      );
  } catch (err) {
    log.warn({ err: (err as Error).message }, "EVENTS sizing could not be read");
  }
}

/** The service's `/metrics` listener (RECOVERY_METRICS_PORT; unset: none). */
function serveMetrics(config: RecoveryConfig, metrics: RecoveryMetrics, log: Logger) {
  if (config.RECOVERY_METRICS_PORT === undefined) return undefined;
  const server = Bun.serve({
    hostname: config.RECOVERY_METRICS_HOST,
    port: config.RECOVERY_METRICS_PORT,
    fetch: (req) =>
      new URL(req.url).pathname === "/metrics" ? metrics.response() : new Response("not found", { status: 404 }),
  });
  log.info({ metrics: `http://${config.RECOVERY_METRICS_HOST}:${server.port}/metrics` }, "recovery metrics listening");
  return server;
}

/**
 * The region's topology is this service's to create (issue 34: the gateway's and the solver's
 * users may not create or change a stream, a bucket or the notifier's consumers; they wait for
 * them): TASKS, EVENTS, DLQ, BODIES (how long it keeps image bodies: BODIES_MAX_AGE_MS), the
 * config, workers, region and rollout buckets, the notifier's consumers.
 */
async function provisionTopology(config: RecoveryConfig, ctx: RecoveryContext, log: Logger): Promise<void> {
  const provisioned = await provisionRegion(ctx.nc, {
    region: config.REGION,
    replicas: config.STREAM_REPLICAS,
    bodiesMaxAgeMs: config.bodiesMaxAgeMs,
  });
  log.info(provisioned, "region topology created or verified");
}

/** One stale sweep, logged when it found something. */
async function sweepStale(config: RecoveryConfig, ctx: RecoveryContext, log: Logger): Promise<void> {
  const r = await recoverStale(ctx, { staleAfterMs: config.STALE_AFTER_MS });
  if (r.candidates)
    log.info(
      { candidates: r.candidates, republished: r.republished, withMessage: r.withMessage, ms: r.ms },
      "stale sweep",
    );
}

/** One retention run (docs/security.md: tokens, params, callback URLs, old rows), logged. */
async function retainOnce(
  config: RecoveryConfig,
  ctx: RecoveryContext,
  metrics: RecoveryMetrics,
  log: Logger,
): Promise<void> {
  const r = await runRetention(ctx.database.sql, retentionPolicy(config), metrics.retention);
  log.info(
    {
      tokensErased: r.tokensErased,
      paramsPurged: r.paramsPurged,
      rowsDeleted: r.rowsDeleted,
      deliveriesDeleted: r.deliveriesDeleted,
      batches: r.batches,
      ms: r.ms,
    },
    "retention",
  );
}

/**
 * One reconciliation of the last RECONCILE_HOURS (docs/money.md), logged (an error beyond the
 * tolerance) and set into the recovery_reconcile_* gauges.
 */
async function reconcileOnce(
  config: RecoveryConfig,
  ctx: RecoveryContext,
  metrics: RecoveryMetrics,
  log: Logger,
): Promise<void> {
  const r = await runReconcile(ctx.database.sql, config.RECONCILE_HOURS, config.RECONCILE_TOLERANCE_MICROS);
  metrics.reconcile.reconciled(r);
  for (const a of r.accounts)
    (a.agrees === false ? log.error.bind(log) : log.info.bind(log))(
      {
        provider: a.provider,
        hours: r.hours,
        from: a.from,
        to: a.to,
        ledgerNetMicros: a.ledgerNetMicros,
        balanceDeltaMicros: a.balanceDeltaMicros,
        differenceMicros: a.differenceMicros,
        toleranceMicros: r.toleranceMicros,
      },
      a.agrees === false
        ? "reconcile: the provider's balance moved by another amount than the ledger booked (a top-up, another region's or another client's use of the key, or a booking lost)"
        : "reconcile",
    );
}

/**
 * Every other region's events, applied here: reads and Idempotency-Keys work from either region.
 * (A plain postgres.js client: applyEvent binds Dates, which the drizzle-tuned pool does not serialize.)
 */
async function startReplication(config: RecoveryConfig, ctx: RecoveryContext, log: Logger) {
  const remotes = config.regions.filter((r) => r !== config.REGION);
  const replicaSql = remotes.length
    ? postgres(config.DATABASE_URL!, {
        max: 2,
        onnotice: () => {},
        ...RECONNECT,
        connection: { application_name: "recovery-replicator" },
      })
    : undefined;
  const replicators = await Promise.all(
    remotes.map((remote) =>
      startReplicator({
        js: ctx.js,
        jsm: ctx.jsm,
        sql: replicaSql!,
        local: config.REGION,
        remote,
        log,
        replicas: config.STREAM_REPLICAS,
        bodiesMaxAgeMs: config.bodiesMaxAgeMs,
      }),
    ),
  );
  return {
    remotes,
    replicaSql,
    async stop() {
      await Promise.allSettled(replicators.map((r) => r.stop()));
      await replicaSql?.end({ timeout: 5 });
    },
  };
}

/** The service's metrics: EVENTS' sizing, and with several regions the lease and the mirrors. */
async function openMetrics(
  config: RecoveryConfig,
  ctx: RecoveryContext,
  sizeEvents: () => ReturnType<typeof probeEventsSizing>,
  remotes: string[],
): Promise<RecoveryMetrics> {
  const regionKv = remotes.length ? await openRegionBucket(ctx.nc, config.REGION) : undefined;
  return createRecoveryMetrics({
    events: sizeEvents,
    balances: async () => (await readAccountFigures(ctx.database.sql)).map(forecastBalance),
    lanes: { region: config.REGION, read: () => lanesStatus({ jsm: ctx.jsm, region: config.REGION }) },
    ...(regionKv
      ? {
          regions: async () =>
            regionGauges(await probeRegions(ctx.jsm, regionKv, config.REGION, remotes, ctx.database.sql)),
        }
      : {}),
  });
}

/**
 * The long-running part: a stale sweep every SWEEP_INTERVAL_MS and a snapshot every
 * SNAPSHOT_INTERVAL_MS (0 turns either off). A run never overlaps itself; a failed run is logged
 * and the next one is tried on schedule.
 */
export async function startRecovery(config: RecoveryConfig, log: Logger): Promise<RecoveryService> {
  const ctx = await openContext(config, log, "recovery");
  await provisionTopology(config, ctx, log);
  const sizeEvents = () =>
    probeEventsSizing(ctx.jsm, {
      region: config.REGION,
      snapshotDir: config.SNAPSHOT_DIR,
      snapshotIntervalMs: config.SNAPSHOT_INTERVAL_MS,
      snapshotMaxAgeMs: config.SNAPSHOT_MAX_AGE_MS,
    });
  await warnOnEventsSizing(sizeEvents, log);
  const timed = jobs(log);
  timed.every(config.SWEEP_INTERVAL_MS, "stale sweep", () => sweepStale(config, ctx, log));
  // Every lane consumer agrees with its lane's pause record (apps/recovery/src/lanes).
  timed.every(LANE_ENFORCE_MS, "lane pauses", async () => {
    const mended = await enforceLanes({ jsm: ctx.jsm, region: config.REGION });
    if (mended.length)
      log.warn({ consumers: mended }, "lane consumers disagreed with their lane's pause record: mended");
  });
  const replication = await startReplication(config, ctx, log);
  const { remotes, replicaSql } = replication;
  // NOTIFY_WEBHOOK_URL: fences, takeovers, breaker storms and DLQ growth reach the operators' channel.
  const notifier = await openNotifier(config, ctx, log);
  if (notifier) startNotifyWatches(config, ctx, notifier, timed.every);
  // The region lease (several regions only): renewed at the witness, taken over from a silent region.
  let stopping = false;
  const keeper =
    remotes.length && config.WITNESS_URL
      ? startKeeperAtWitness(
          config,
          ctx,
          remotes,
          replicaSql!,
          log,
          () => stopping,
          // The keeper tells a return to service only after a fence (the first renewal at start is not news).
          (e) => notifier?.post(leaseNotification(e)),
        )
      : undefined;
  const metrics = await openMetrics(config, ctx, sizeEvents, remotes);
  timed.every(config.SNAPSHOT_INTERVAL_MS, "snapshot", () => snapshotAndCopy(config, ctx, metrics, log));
  timed.every(config.RETENTION_INTERVAL_MS, "retention", () => retainOnce(config, ctx, metrics, log));
  timed.every(config.RECONCILE_INTERVAL_MS, "reconcile", () => reconcileOnce(config, ctx, metrics, log));
  // Incidents: rollbacks, failovers, breaker storms seen in their sources, recorded once each (docs/incidents.md).
  // A breaker storm's incident is also told to the operators' webhook (docs/notifications.md).
  const onOpened = (o: Observation, id: number) => {
    if (o.kind === "breaker") notifier?.post(breakerStormNotification(o, id));
  };
  timed.every(INCIDENT_TICK_MS, "incidents", await incidentJob(config, ctx, log, onOpened));
  const metricsServer = serveMetrics(config, metrics, log);
  // The operator console (CONSOLE_PORT), when CONSOLE_TOKENS names someone.
  const operatorConsole = await startConsole(config, ctx, log);
  log.info(
    {
      region: config.REGION,
      sweepEveryMs: config.SWEEP_INTERVAL_MS,
      snapshotEveryMs: config.SNAPSHOT_INTERVAL_MS,
      snapshotDir: config.SNAPSHOT_DIR,
    },
    "recovery service started",
  );
  return {
    async stop() {
      stopping = true;
      timed.clear();
      void metricsServer?.stop(true);
      await operatorConsole?.stop();
      await keeper?.stop();
      await replication.stop();
      await timed.settled();
      await ctx.close();
    },
  };
}
