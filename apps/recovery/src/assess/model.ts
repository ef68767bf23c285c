// What `assess` reports: verdicts (checks) and the figures they were drawn from.
import type { Heartbeat } from "@pipeline/shared/kv";
import type { Forecast } from "../money/forecast.ts";

export type Level = "ok" | "warn" | "fail";

export interface Check {
  name: string;
  level: Level;
  summary: string;
  /** What to do about it, when something is wrong. */
  hint?: string;
}

export interface LaneInfo {
  consumer: string;
  filter: string;
  /** Messages not yet delivered (the lag). */
  pending: number;
  /** Delivered, not yet acked (in flight). */
  ackPending: number;
  redelivered: number;
  waitingPulls: number;
}

export interface TaskFigures {
  byState: Record<string, number>;
  stuckSolving: number;
  oldestStuckSolvingSec: number | null;
  staleQueued: number;
  oldestQueuedSec: number | null;
}

export interface Assessment {
  at: string;
  region: string;
  level: Level;
  checks: Check[];
  queue: { stream: string; exists: boolean; messages: number; lanes: LaneInfo[] } | null;
  dlq: { stream: string; messages: number } | null;
  tasks: TaskFigures | null;
  snapshot: { name: string; ageSec: number } | null;
  provider: { url: string; reachable: boolean; balance: string | null; error: string | null } | null;
  breaker: { state: string; reason: string | null; worker: string | null; at: string } | null;
  workers: Heartbeat[] | null;
  /** Each provider account's newest balance and hours left at the last hour's spend (null: not read). */
  balances: Forecast[] | null;
}
