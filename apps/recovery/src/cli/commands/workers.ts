// `recovery workers`: the live solvers from their heartbeats.
import { type Heartbeat, liveWorkers } from "@pipeline/shared/kv";
import type { CommandOf } from "../args.ts";
import { type CliEnv, print } from "../env.ts";
import { withFleet } from "../fleet.ts";

/** One line per live solver: key, config revision (or the one it refuses), breaker, in flight. */
export function renderWorkers(ws: Heartbeat[]): string {
  if (ws.length === 0) return "no live solver (no heartbeat in the last 10 s)";
  return ws
    .map(
      (w) =>
        `${w.workerId.padEnd(24)} pid ${String(w.pid).padEnd(7)} ${w.host}  ${w.version}  key ${w.keyName} (${w.keyRef})  config rev ${w.configRevision ?? "env"}${w.configRejected ? ` REFUSES rev ${w.configRejected.revision}: ${w.configRejected.error}` : ""}  breaker ${w.breaker}  ${w.inFlight} in flight`,
    )
    .join("\n");
}

export function workersCommand(cmd: CommandOf<"workers">, env: CliEnv): Promise<number> {
  return withFleet(env, undefined, async ({ workersKv }) => {
    const w = await liveWorkers(workersKv);
    print(
      cmd.json,
      w,
      renderWorkers(w.workers) + (w.unreadable.length ? `\nunreadable heartbeats: ${w.unreadable.join(", ")}` : ""),
    );
    return 0;
  });
}
