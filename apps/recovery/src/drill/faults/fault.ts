// What every drill fault shares: its dependencies, its shape, and the error a drill refuses with.
import type { KV } from "@nats-io/kv";
import type { RecoveryContext } from "../../context.ts";
import type { ConfigDeps } from "../../fleet/config-ops.ts";

export class DrillError extends Error {
  override name = "DrillError";
}

export interface FaultDeps {
  ctx: RecoveryContext;
  configKv: KV;
  workersKv: KV;
  actor: string;
  databaseUrl: string;
  snapshotDir: string;
  snapshotKeep: number;
  gatewayGraceMs: number;
  /** key-compromise: the key name to rotate to. */
  keyTo?: string;
  /** A step of the drill, in the order it happened (printed in the report). */
  step(what: string): void;
}

/** One scenario: checks before the load starts, then the fault and the runbook's remedy. */
export interface Fault {
  /** Runs before the baseline (a snapshot for db-loss; refuses when the drill cannot run). */
  prepare(): Promise<void>;
  /** Injects the fault, then applies the runbook's command(s). Resolves once the remedy is applied. */
  inject(): Promise<Record<string, unknown>>;
}

/** The runtime-config operations' dependencies, acting as the drill's actor. */
export const configDeps = (d: FaultDeps): ConfigDeps => ({
  config: d.configKv,
  workers: d.workersKv,
  db: d.ctx.database.db,
  actor: d.actor,
});
