// `npm run rehearse -- drills [name...]`: faults on the fleet's real hosts while tasks flow through
// the load balancer, one at a time. Each prints the project's drill line (drill-line.ts) from what
// the clients saw and the provider was paid for, and `alert <name> after S s` from the alert
// receiver. The bar: nothing lost, failed, paid twice (but for what a killed solver had paid and
// not checkpointed, drill-line.ts) or answered twice, RTO <= 60 s, the alert within 2 minutes.
import type { LbClient } from "./client.ts";
import {
  type DrillFigures,
  drillFigures,
  drillLine,
  drillPassed,
  failureCauses,
  type PaidSnapshots,
  paidInFlightBound,
} from "./drill-line.ts";
import { type Log, sleep, waitFor } from "./exec.ts";
import { allGatewaysUp } from "./gapless.ts";
import { inMachineAsync, powerOff, powerOnAgain } from "./machine.ts";
import { markAlerts, receivedAlerts, waitForAlert } from "./monitoring.ts";
import { REGION_APPS_OFF, REGION_CUT, REGION_LOST } from "./region-drill.ts";
import { ROLLOUT_DRILLS } from "./rollout-drills.ts";
import type { HostState, State } from "./state.ts";
import { startTrackedLoad } from "./tracked-load.ts";

export interface FleetDrill {
  name: string;
  /** The alert that must reach the receiver; none: no alert may fire. */
  alert?: string;
  /** The host it happens on: the role and which of them. */
  role: string;
  index: number;
  what: string;
  /** What comes before the drill's clock and load (a deploy). */
  prepare?(h: HostState, ctx: DrillContext): Promise<void>;
  inject(h: HostState, ctx: DrillContext): Promise<void>;
  /**
   * Undoes the fault once the alert arrived (or did not), and waits until the host serves again.
   * A region cut says when it healed: the RTO then counts what the survivor finished before it.
   */
  undo(h: HostState, ctx: DrillContext): Promise<void | { healedAt: number }>;
  /**
   * The fault kills solver processes: a submission it lands on between in.php's `OK|<id>` and the
   * checkpoint is paid again by the peer that takes the task over (paidInFlightBound of the load
   * may be; none where this is unset).
   */
  killsSolvers?: boolean;
  /** Needs two regions (the fleet of `up --regions fsn1,hel1`). */
  twoRegions?: boolean;
  /**
   * What the clients know: both regions' LB URLs (the default; the home one's alone with one
   * region), the home region's alone, or the shared name alone (resolved through the failover
   * name server, dns-server.ts).
   */
  clients?: "both" | "home" | "shared";
}

export interface DrillContext {
  state: State;
  /** The home region's LB (the load goes there), and the other region's when there are two. */
  client: LbClient;
  other?: LbClient;
  /** The shared name's client (the fleet's name server), when `up` started one. */
  shared?: LbClient;
  log: Log;
}

const sh = async (h: HostState, script: string) => {
  const r = await inMachineAsync(h, script, { timeoutMs: 60_000 });
  if (r.code !== 0) throw new Error(`${h.name}: ${script}: ${r.stderr.trim() || r.stdout.trim()}`);
  return r.stdout;
};

/** Every app host's gateway UP in the home LB's HAProxy again. */
const gatewaysUp = (ctx: DrillContext) =>
  allGatewaysUp(
    ctx.state.hosts.find((h) => h.role === "lb")!.ip,
    ctx.state.hosts.filter((h) => h.role === "app").map((h) => h.name),
    180_000,
  );

async function natsHealthy(ctx: DrillContext): Promise<void> {
  for (const n of ctx.state.hosts.filter((h) => h.role === "nats"))
    await waitFor(`${n.name}: JetStream healthy`, 120_000, async () =>
      (await inMachineAsync(n, `curl -sf http://${n.ip}:8222/healthz`)).code === 0 ? true : undefined,
    );
}

export const FLEET_DRILLS: FleetDrill[] = [
  {
    name: "solver-kill",
    alert: "AppRestarted",
    role: "app",
    index: 0,
    what: "kill -9 of solver@v1's main process; systemd restarts it",
    killsSolvers: true,
    inject: async (h) => void (await sh(h, "systemctl kill --signal=SIGKILL --kill-whom=main solver@v1.service")),
    undo: async (h) => {
      await waitFor(`${h.name}: solver@v1 active again`, 60_000, async () =>
        (await inMachineAsync(h, "systemctl is-active solver@v1.service")).stdout.trim() === "active"
          ? true
          : undefined,
      );
    },
  },
  {
    name: "app-host-off",
    alert: "HostDown",
    role: "app",
    index: 1,
    what: "the app host's power pulled (every process killed at once), on again after the page",
    killsSolvers: true,
    inject: async (h) => powerOff(h, h.nspawnPid),
    undo: async (h, ctx) => {
      await powerOnAgain(h, ctx.state, ctx.log);
      await gatewaysUp(ctx);
    },
  },
  {
    name: "nats-node-kill",
    alert: "NatsDown",
    role: "nats",
    index: 2,
    what: "kill -9 of a NATS server of the 3-node cluster, kept down until the page, then started",
    inject: async (h) =>
      void (await sh(h, "systemctl kill --signal=SIGKILL nats-server.service; systemctl stop nats-server.service")),
    undo: async (h, ctx) => {
      await sh(h, "systemctl start nats-server.service");
      await natsHealthy(ctx);
    },
  },
  ...ROLLOUT_DRILLS,
  REGION_CUT,
  REGION_APPS_OFF,
  REGION_LOST,
];

export interface FleetDrillResult {
  name: string;
  line: string;
  alertLine: string;
  figures: DrillFigures;
  /** The most extra payments in flight at the fault the drill allows (paidInFlightBound of its load; 0 unless it kills solvers). */
  maxInFlightAtFault: number;
  alertAfterS?: number;
  passed: boolean;
}

/** What the provider was paid so far, per fingerprint: how often and (an emulator of this repo) when. */
async function paidByFingerprint(
  state: State,
): Promise<{ byFingerprint: Record<string, number>; paidAtByFingerprint?: Record<string, number[]> }> {
  const r = await fetch(`${state.services.emulatorUrl}/emulator/stats`, { signal: AbortSignal.timeout(5000) });
  return (await r.json()) as { byFingerprint: Record<string, number>; paidAtByFingerprint?: Record<string, number[]> };
}

/** The alert line: the awaited alert's delay, or (none expected) that nothing fired. */
async function alertOutcome(d: FleetDrill, from: number, waited: Promise<number | undefined>) {
  if (d.alert) {
    const afterS = await waited;
    return { afterS, ok: afterS !== undefined && afterS <= 120 };
  }
  const fired = (await receivedAlerts())
    .slice(from)
    .filter((a) => a.status === "firing")
    .map((a) => a.name);
  return {
    line: fired.length ? `unexpected alerts: ${fired.join(", ")}` : "alert none (none expected)",
    ok: !fired.length,
  };
}

function clientsOf(d: FleetDrill, ctx: DrillContext): LbClient[] {
  if (d.clients === "shared") {
    if (!ctx.shared) throw new Error(`${d.name}: the fleet has no name server (state.json's sharedUrl): \`up\` again`);
    return [ctx.shared];
  }
  return d.clients !== "home" && ctx.other ? [ctx.client, ctx.other] : [ctx.client];
}

/** One drill: load, the fault, the alert awaited, the fault undone, the load drained; its lines. */
export async function runFleetDrill(d: FleetDrill, ctx: DrillContext, perSecond = 4): Promise<FleetDrillResult> {
  const h = ctx.state.hosts.filter((x) => x.role === d.role)[d.index];
  if (!h) throw new Error(`${d.name}: no ${d.role} host ${d.index + 1} in the fleet`);
  await d.prepare?.(h, ctx);
  const before = (await paidByFingerprint(ctx.state)).byFingerprint;
  const load = startTrackedLoad(clientsOf(d, ctx), perSecond, `drill-${d.name}-${Date.now()}`);
  await sleep(10_000);
  const from = await markAlerts();
  const faultAt = Date.now();
  ctx.log(`${d.name}: ${h.name}: ${d.what}`);
  let error = "";
  let waited: Promise<number | undefined> = Promise.resolve(undefined);
  let injectedAt = faultAt;
  try {
    await d.inject(h, ctx);
    injectedAt = Date.now();
    if (d.alert)
      waited = waitForAlert(d.alert, from, 120_000).then(
        (a) => a.afterMs / 1000,
        (err: Error) => void (error = err.message),
      );
    await waited;
  } catch (err) {
    error = (err as Error).message;
  }
  let healedAt: number | undefined;
  try {
    healedAt = (await d.undo(h, ctx))?.healedAt;
  } catch (err) {
    error = `${error ? `${error}; ` : ""}undo: ${(err as Error).message}`;
  }
  ctx.log(`${d.name}: undone ${((Date.now() - faultAt) / 1000).toFixed(1)} s after the fault`);
  await sleep(10_000);
  const records = await load.stop();
  const after = await paidByFingerprint(ctx.state);
  const paid: PaidSnapshots = { before, after: after.byFingerprint, paidAtAfter: after.paidAtByFingerprint };
  const figures = drillFigures(records, faultAt, paid, { healedAt, injectedAt });
  if (healedAt !== undefined)
    ctx.log(
      `${d.name}: healed ${((healedAt - faultAt) / 1000).toFixed(1)} s after the cut; ${figures.afterHeal} tasks acknowledged before it ended at home after the heal (no provider id had reached the survivor)`,
    );
  const a = await alertOutcome(d, from, waited);
  const alertLine =
    a.line ??
    (a.afterS === undefined ? `no alert ${d.alert} within 120 s` : `alert ${d.alert} after ${a.afterS.toFixed(1)} s`);
  if (error) ctx.log(`${d.name}: ${error}`);
  const causes = failureCauses(records);
  if (causes.length) ctx.log(`${d.name}: failed tasks: ${causes.join("; ")}`);
  const maxInFlightAtFault = d.killsSolvers ? paidInFlightBound(perSecond) : 0;
  const passed = drillPassed(figures, { maxInFlightAtFault }) && a.ok && !error;
  return {
    name: d.name,
    line: drillLine(d.name, figures),
    alertLine,
    figures,
    maxInFlightAtFault,
    alertAfterS: a.afterS,
    passed,
  };
}

/** The drills named (all when none), one after another; each one's lines as it ends. */
export async function runFleetDrills(ctx: DrillContext, names: string[]): Promise<FleetDrillResult[]> {
  const unknown = names.filter((n) => !FLEET_DRILLS.some((d) => d.name === n));
  if (unknown.length)
    throw new Error(`no drill ${unknown.join(", ")}; the drills: ${FLEET_DRILLS.map((d) => d.name).join(", ")}`);
  const results: FleetDrillResult[] = [];
  const regions = ctx.state.regions?.length ?? 1;
  for (const d of FLEET_DRILLS.filter((x) => !names.length || names.includes(x.name))) {
    if (d.twoRegions && regions < 2) {
      if (names.length) throw new Error(`${d.name} needs two regions: npm run rehearse -- up --regions fsn1,hel1`);
      ctx.log(`${d.name}: skipped (one region; \`up --regions fsn1,hel1\` for it)`);
      continue;
    }
    const r = await runFleetDrill(d, ctx);
    console.log(`${r.line}\n${r.alertLine}`);
    if (r.figures.refusedAttempts)
      ctx.log(`${d.name}: ${r.figures.refusedAttempts} submission attempts not acknowledged at first, retried`);
    results.push(r);
  }
  return results;
}
