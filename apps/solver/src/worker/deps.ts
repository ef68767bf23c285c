// What the task handler and the waiting room need, and the shapes they pass between them.
import type { TaskRow } from "@pipeline/shared/db";
import type { Logger } from "@pipeline/shared/log";
import type { ProviderProfile } from "@pipeline/shared/provider";
import type { Priority, TaskType } from "@pipeline/shared/schemas";
import type { Poller } from "../adapters/bulk-poller.ts";
import type { EventSink } from "../adapters/nats.ts";
import type { SolverStore } from "../adapters/pg.ts";
import type { ProviderClient } from "../adapters/provider.ts";
import type { ProviderSlots, Unit } from "../adapters/slots.ts";
import type { LedgerContext } from "../domain/charge.ts";
import type { FairScheduler } from "../domain/fair-share.ts";
import type { KeyRing, ProviderKeyInUse } from "../domain/keyring.ts";
import type { Outcome } from "../domain/outcome.ts";
import type { Permits } from "../domain/permits.ts";
import type { TimingReader } from "../domain/timing.ts";
import type { ProviderWindow } from "./provider-window.ts";
import type { Sleeper } from "./sleeps.ts";

export interface HandlerDeps {
  workerId: string;
  store: SolverStore;
  provider: ProviderClient;
  /** Folds polls into bulk requests; without it each poll is its own request. */
  poller?: Poller;
  /**
   * Caps the tasks in their start phase (claim, submit, checkpoint: the Postgres-heavy part,
   * entered once a unit of the plan is taken) at once; a task leaves it when it starts waiting for
   * the provider. Without it, thousands of deliveries arriving together queue thousands of
   * queries at once.
   */
  admission?: Permits;
  slots: ProviderSlots;
  /** The adaptive window per account (ADAPTIVE_CONCURRENCY=1); absent: the plan alone caps the provider tasks. */
  window?: ProviderWindow;
  /** The provider key in use (it may change between two tasks: key rotation) and a breaker per key. */
  keys: KeyRing;
  /** With several regions: may this region make new provider submissions (its lease)? Absent: always. */
  fence?: { allows(): boolean };
  events: EventSink;
  log: Logger;
  /** The timing in use: read (`get()`) where a value is used, so a config revision is seen from the next use. */
  timing: TimingReader;
  profile: ProviderProfile;
  /** Counters the worker exposes (dedup acks, resumes...). */
  counters: Record<string, number>;
  /** Metrics hooks (Prometheus in the service; absent in some tests). */
  metrics?: { event(name: string): void; solved(type: string, seconds: number): void };
  random?: () => number;
  /** Books each answer read in the ledger (its charge); absent: nothing booked (some tests). */
  ledger?: LedgerContext;
  /** The waits between steps (slot retries, first poll, poll interval): one timer for them all. */
  sleeper: Sleeper;
  /** Weighted fair share among fair-share groups (domain/fair-share.ts): threads charged to their group. */
  fair?: FairScheduler;
}

export interface Delivery {
  taskId: string;
  /** The task's type (the message says it): routing compares the accounts' prices for it. */
  type?: TaskType;
  priority: Priority;
  deliveries: number;
  /** The fair-share group whose consumer delivered it (undefined: the lane's own subjects). */
  group?: string;
}

/** A task waiting for the provider's answer, as the handler leaves it to the waiting room. */
export interface Parked {
  taskId: string;
  type: TaskType;
  providerId: string;
  key: ProviderKeyInUse;
  /** res.php calls made for it so far in this delivery. */
  polls: number;
  /** New provider tasks this delivery made for it (bounded by maxResubmits). */
  resubmits: number;
  firstDelayMs: number;
  /** The task's needBy (ms since the epoch): a wait still unanswered past it fails the task (NEED_BY_PASSED). */
  needByMs?: number;
}

/** One delivery's progress: claimed yet, and the unit of the plan it took (slots.ts). */
export interface Progress {
  claimed: boolean;
  unit?: Unit;
}

/** What the handler decided: an outcome for the message, or a task parked in the waiting room. */
export type Handled = Outcome | { kind: "parked"; parked: Parked };

/**
 * A task the waiting room hands back to be submitted anew: the one step it does not take itself.
 * Its provider task was given up (the provider's, or one of a key no longer in use: its id is
 * forgotten) or the row holds none; `row` is the row as the room read it at the end of the wait,
 * still this worker's.
 */
export interface Resume {
  parked: Parked;
  row: TaskRow;
}

/** Counts an event for the worker's counters and the metrics. */
export function counter(deps: Pick<HandlerDeps, "counters" | "metrics">) {
  return (k: string) => {
    deps.counters[k] = (deps.counters[k] ?? 0) + 1;
    deps.metrics?.event(k);
  };
}
