// worker-crash: kill -9 the busiest local solver; the fleet's own leases and redelivery recover.
import { hostname } from "node:os";
import { liveWorkers } from "@pipeline/shared/kv";
import { checkVictim, readProc } from "../victim.ts";
import { DrillError, type Fault, type FaultDeps } from "./fault.ts";

/** Refuses unless a solver of this host is alive; kills the one with the most in flight. */
export function workerCrash(d: FaultDeps): Fault {
  return {
    async prepare() {
      const { workers } = await liveWorkers(d.workersKv);
      if (!workers.some((w) => w.host === hostname()))
        throw new DrillError(`no live solver on this host (${hostname()}) to kill: the drill kills a local process`);
    },
    async inject() {
      const { workers } = await liveWorkers(d.workersKv);
      const here = workers.filter((w) => w.host === hostname()).sort((a, b) => b.inFlight - a.inFlight);
      const victim = here[0];
      if (!victim) throw new DrillError("no live solver on this host to kill");
      // The pid comes from KV: kill it only if it is a solver of this region (victim.ts).
      const check = checkVictim(victim.pid, d.ctx.region, victim.startedAt, readProc(victim.pid));
      if (!check.ok) throw new DrillError(`refusing to kill ${victim.workerId}: ${check.why}`);
      process.kill(victim.pid, "SIGKILL");
      d.step(
        `kill -9 ${victim.workerId} (pid ${victim.pid}, ${victim.inFlight} in flight); ${workers.length - 1} other solver(s) alive`,
      );
      if (workers.length === 1) d.step("no other solver: recovery waits for the supervisor to restart one");
      // The runbook's remedy is the fleet's own: the victim's leases run out, its messages are
      // redelivered and taken over (the provider ids are resumed, never resubmitted).
      return {
        victim: victim.workerId,
        pid: victim.pid,
        inFlightAtKill: victim.inFlight,
        survivors: workers.length - 1,
      };
    },
  };
}
