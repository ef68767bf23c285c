import { Counter, createRegistry, Gauge, metricsResponse, type Registry } from "@pipeline/shared/metrics";
import type { EventsSizing } from "../assess/events-sizing.ts";
import type { LaneState } from "../lanes/model.ts";
import type { Forecast } from "../money/forecast.ts";
import { laneGauges } from "./lane-gauges.ts";
import { balanceGauges, type ReconcileMetrics, reconcileGauges } from "./money-gauges.ts";
import type { RegionGauge } from "./region-gauges.ts";

/** What the recovery service counts (served on RECOVERY_METRICS_PORT when set). */
export interface RecoveryMetrics {
  registry: Registry;
  retention: RetentionMetrics;
  offhost: OffHostMetrics;
  reconcile: ReconcileMetrics;
  response(): Promise<Response>;
}

export interface RetentionMetrics {
  rows(action: "token_erased" | "params_purged" | "row_deleted" | "delivery_deleted", n: number): void;
  run(result: "ok" | "error", ms: number): void;
}

export interface OffHostMetrics {
  copy(result: "ok" | "error", bytes: number): void;
}

/**
 * `regions`: read at scrape time (several regions only): the lease and mirror figures as gauges
 * (region-gauges.ts), from the same probe as `assess`. `balances`: the provider accounts'
 * forecasts, read at scrape time (money-gauges.ts).
 */
export function createRecoveryMetrics(
  o: {
    regions?: () => Promise<RegionGauge[]>;
    events?: () => Promise<EventsSizing>;
    balances?: () => Promise<Forecast[]>;
    /** The region's lanes, paused or running (lane-gauges.ts). */
    lanes?: { region: string; read: () => Promise<LaneState[]> };
  } = {},
): RecoveryMetrics {
  const registry = createRegistry("recovery");
  if (o.events) eventsGauges(registry, o.events);
  if (o.lanes) laneGauges(registry, o.lanes.region, o.lanes.read);
  if (o.balances) balanceGauges(registry, o.balances);
  const reconcile = reconcileGauges(registry);
  if (o.regions) {
    const read = o.regions;
    const names: Record<RegionGauge["name"], string> = {
      recovery_region_may_submit:
        "1 when this region holds a valid lease and may submit to the provider, 0 when fenced",
      recovery_region_lease_valid_seconds: "Seconds the region's lease view is still valid (negative: lapsed)",
      recovery_region_lease_epoch: "Epoch of the region's lease view",
      recovery_region_mirror_lag_messages: "Messages the mirror of another region's EVENTS is behind",
      recovery_region_mirror_idle_seconds: "Seconds since the mirror of another region's EVENTS last heard from it",
      recovery_region_replica_pending: "Mirrored events of another region not yet applied to this region's database",
      recovery_region_plan_share_threads:
        "This region's share of a provider account's thread plan its solvers lease against (0: none valid, it starts no provider task)",
    };
    // One probe per scrape, shared by every region gauge.
    let pending: Promise<RegionGauge[]> | undefined;
    const snapshot = () => (pending ??= read().finally(() => setTimeout(() => (pending = undefined), 0)));
    for (const [name, help] of Object.entries(names) as [RegionGauge["name"], string][]) {
      new Gauge({
        name,
        help,
        labelNames: ["region", "remote", "holder"],
        registers: [registry],
        async collect() {
          this.reset();
          for (const g of await snapshot().catch(() => [])) if (g.name === name) this.set(g.labels, g.value);
        },
      });
    }
  }
  const rows = new Counter({
    name: "recovery_retention_rows_total",
    help: "Rows changed by the retention job, by action",
    labelNames: ["action"],
    registers: [registry],
  });
  const runs = new Counter({
    name: "recovery_retention_runs_total",
    help: "Retention runs, by result",
    labelNames: ["result"],
    registers: [registry],
  });
  const lastRun = new Gauge({
    name: "recovery_retention_last_success_timestamp_seconds",
    help: "When the last retention run succeeded (unix seconds)",
    registers: [registry],
  });
  const runSeconds = new Gauge({
    name: "recovery_retention_last_run_seconds",
    help: "How long the last retention run took",
    registers: [registry],
  });
  const copies = new Counter({
    name: "recovery_snapshot_offhost_copies_total",
    help: "Snapshot copies sent off the host and verified, by result",
    labelNames: ["result"],
    registers: [registry],
  });
  const copyBytes = new Counter({
    name: "recovery_snapshot_offhost_bytes_total",
    help: "Bytes of snapshot dumps copied off the host and verified",
    registers: [registry],
  });
  const lastCopy = new Gauge({
    name: "recovery_snapshot_offhost_last_success_timestamp_seconds",
    help: "When the last verified off-host snapshot copy finished (unix seconds)",
    registers: [registry],
  });
  for (const a of ["token_erased", "params_purged", "row_deleted", "delivery_deleted"]) rows.inc({ action: a }, 0);
  for (const r of ["ok", "error"]) {
    runs.inc({ result: r }, 0);
    copies.inc({ result: r }, 0);
  }
  return {
    registry,
    reconcile,
    retention: {
      rows: (action, n) => rows.inc({ action }, n),
      run: (result, ms) => {
        runs.inc({ result });
        runSeconds.set(ms / 1000);
        if (result === "ok") lastRun.setToCurrentTime();
      },
    },
    offhost: {
      copy: (result, bytes) => {
        copies.inc({ result });
        if (result === "ok") {
          copyBytes.inc(bytes);
          lastCopy.setToCurrentTime();
        }
      },
    },
    response: () => metricsResponse(registry),
  };
}

type EventsReading = EventsSizing;

/**
 * EVENTS against its limits and the snapshot interval (assess/events-sizing.ts), read at scrape
 * time from one probe, labelled `stream`; a limit that is not set (0 or less) and a figure not
 * known are left out (an unlabelled gauge would read 0, and `bytes / max_bytes` would fire).
 */
function eventsGauges(registry: Registry, read: () => Promise<EventsReading>): void {
  let pending: Promise<EventsReading | undefined> | undefined;
  const reading = () =>
    (pending ??= read()
      .catch(() => undefined)
      .finally(() => setTimeout(() => (pending = undefined), 0)));
  const figures: Array<[string, string, (r: EventsReading) => number | null]> = [
    ["recovery_events_bytes", "Bytes held by this region's EVENTS stream", (r) => r.events.bytes],
    [
      "recovery_events_max_bytes",
      "EVENTS' max_bytes (absent: none)",
      (r) => (r.events.maxBytes > 0 ? r.events.maxBytes : null),
    ],
    ["recovery_events_messages", "Messages held by this region's EVENTS stream", (r) => r.events.messages],
    [
      "recovery_events_max_messages",
      "EVENTS' max_msgs (absent: none)",
      (r) => (r.events.maxMessages > 0 ? r.events.maxMessages : null),
    ],
    [
      "recovery_events_max_age_seconds",
      "EVENTS' max_age (absent: none)",
      (r) => (r.events.maxAgeMs > 0 ? r.events.maxAgeMs / 1000 : null),
    ],
    [
      "recovery_events_oldest_age_seconds",
      "Age of the oldest event EVENTS holds",
      (r) => (r.oldestAgeMs === null ? null : r.oldestAgeMs / 1000),
    ],
    [
      "recovery_events_window_seconds",
      "How long a window EVENTS' limits hold at the rate measured over what it holds (absent: no limit binds)",
      (r) => (Number.isFinite(r.holdsMs) ? r.holdsMs / 1000 : null),
    ],
    [
      "recovery_events_needed_seconds",
      "The window a restore may need: max(SNAPSHOT_MAX_AGE_MS, 2 x SNAPSHOT_INTERVAL_MS)",
      (r) => r.needMs / 1000,
    ],
    ["recovery_events_first_seq", "Sequence of the oldest event EVENTS holds", (r) => r.events.firstSeq],
    [
      "recovery_snapshot_events_seq",
      "EVENTS sequence recorded by the newest snapshot (a restore replays from the next one)",
      (r) => r.snapshotSeq,
    ],
  ];
  for (const [name, help, pick] of figures) {
    // Labelled by stream, so that a figure not known (or a limit not set) is no series at all.
    new Gauge({
      name,
      help,
      labelNames: ["stream"],
      registers: [registry],
      async collect() {
        this.reset();
        const r = await reading();
        const v = r ? pick(r) : null;
        if (r && v !== null) this.set({ stream: r.events.stream }, v);
      },
    });
  }
}
