import { type KV, Kvm } from "@nats-io/kv";
import { freePort } from "@pipeline/devstack";
import { rolloutEnv, solverEnv } from "@pipeline/devstack/stack";
import { eventually, readTaskEvents } from "@pipeline/devstack/testing";
import { workerNameOf } from "@pipeline/shared/kv";
import { connectNats, type NatsConnection } from "@pipeline/shared/nats";
import { type Proc, ROOT, spawnApp } from "../harness.ts";
import { REGIONS, type Region, startTwoRegions, steadyLoad, type TwoRegions } from "./two-regions.ts";

export interface RolloutStage {
  two: TwoRegions;
  service: Proc;
  /** kill -9 the rollout service and start it again (a crash at whatever it was doing). */
  crashService(): Promise<void>;
  canaries: Proc[];
  statusUrl: string;
  /** `npm run rollout -- <args>` against the stage, as an operator in fsn1 runs it. */
  cli(...args: string[]): Promise<{ code: number; out: string }>;
  stop(): Promise<void>;
}

/** The rollout service, home fsn1, reaching hel1 through the suffixed settings (NATS_URL_HEL1...). */
const rolloutServiceEnv = (two: TwoRegions) => rolloutEnv(two.regions[0].wiring, [two.regions[1].wiring]);

/** The v2 solver of a region: the same settings as the region's v1 solver, plus `env`. */
function spawnCanary(two: TwoRegions, r: Region, env: Record<string, string>): Proc {
  const workerId = `solver-${r.name}-v2`;
  return spawnApp(
    workerId,
    "apps/solver/src/main.ts",
    { ...solverEnv(r.wiring, { workerId }), SOLVER_VERSION: "v2", ...env },
    two.logDir,
  );
}

export async function startRolloutStage(
  o: { canaryEnv?: Record<string, string>; serviceEnv?: Record<string, string> } = {},
): Promise<RolloutStage> {
  const two = await startTwoRegions({ emulator: { latencyMs: 300 }, solverEnv: { SOLVER_VERSION: "v1" } });
  const canaries = two.regions.map((r) => spawnCanary(two, r, o.canaryEnv ?? {}));
  const port = await freePort();
  const env = rolloutServiceEnv(two);
  const spawnService = () =>
    spawnApp(
      "rollout",
      "apps/rollout/src/main.ts",
      { ...env, ROLLOUT_TICK_MS: "500", ROLLOUT_HTTP_PORT: String(port), ...o.serviceEnv },
      two.logDir,
    );
  let service = spawnService();
  const statusUrl = `http://127.0.0.1:${port}/v1/rollout`;
  const cli = async (...args: string[]) => {
    const p = Bun.spawn([process.execPath, `${ROOT}/apps/rollout/src/cli.ts`, ...args], {
      env: { ...process.env, ...env, LOG_LEVEL: "warn" },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [out, err, code] = await Promise.all([
      new Response(p.stdout).text(),
      new Response(p.stderr).text(),
      p.exited,
    ]);
    return { code, out: out + err };
  };
  // Ready when both versions run in both regions (the registry the rollout reads) and the service answers.
  await eventually(
    async () => {
      const s = (await (await fetch(statusUrl).catch(() => undefined))?.json().catch(() => undefined)) as
        | { regions?: Record<string, { processes: Record<string, number> }> }
        | undefined;
      return REGIONS.every((r) => (s?.regions?.[r]?.processes.v1 ?? 0) > 0 && (s?.regions?.[r]?.processes.v2 ?? 0) > 0);
    },
    60_000,
    250,
  );
  return {
    two,
    get service() {
      return service;
    },
    async crashService() {
      await service.kill("SIGKILL");
      service = spawnService();
    },
    canaries,
    statusUrl,
    cli,
    async stop() {
      await service.kill("SIGTERM");
      await Promise.all(canaries.map((c) => c.kill("SIGTERM")));
      await two.stop();
    },
  };
}

/**
 * The rollout's record as the rollout service keeps it (KV `rollout_control`, key `current`), read
 * from outside as an operator's tool would: the fields the drills look at.
 */
export interface Rollout {
  state: string;
  applied: boolean;
  region: number;
  reason?: string;
  plan: { steps: number[]; bakeMs: number };
  log: Array<{ action: string; at: string; region?: string; percent?: number }>;
}

async function readRollout(kv: KV): Promise<Rollout | undefined> {
  const e = await kv.get("current");
  return e?.operation === "PUT" ? (e.json() as Rollout) : undefined;
}

export interface DrillFigures {
  acknowledged: number;
  lost: number;
  failed: number;
  extraPaid: number;
  record: Rollout;
  /** Seconds from the rollout's start to its last move (promoted), or from its first move to the rollback. */
  seconds: number;
  /** Tasks a v2 solver took up (events naming it), and how many of those ended completed. */
  touchedByCanary: number;
  touchedCompleted: number;
  solvedBy: Record<string, number>;
}

const at = (r: Rollout, action: string, which: "first" | "last" = "first") => {
  const e = which === "first" ? r.log.find((x) => x.action === action) : r.log.findLast((x) => x.action === action);
  return e ? Date.parse(e.at) : NaN;
};

/**
 * Who took tasks up: every event a worker writes names it (the v2 solvers end in "-v2"): a claim
 * ends in `submitted`, or `retrying`/`failed` before a submit, or `solving` (a resume). Events per
 * worker, and the tasks a v2 solver touched.
 */
async function takenUp(
  two: TwoRegions,
  ids: string[],
): Promise<{ solvedBy: Record<string, number>; touched: Set<string> }> {
  const solvedBy: Record<string, number> = {};
  const touched = new Set<string>();
  for (const r of two.regions) {
    const rc = await connectNats(r.nats.url, `rollout-drill-${r.name}`, r.nats.auth("admin"));
    try {
      for (const e of await readTaskEvents(rc, r.name, ids, ["solving", "submitted", "retrying", "failed"])) {
        const worker = e.data?.worker;
        if (typeof worker !== "string") continue;
        solvedBy[worker] = (solvedBy[worker] ?? 0) + 1;
        if (workerNameOf(worker).endsWith("-v2")) touched.add(e.taskId);
      }
    } finally {
      await rc.close();
    }
  }
  return { solvedBy, touched };
}

/** Runs one rollout of v2 under steady load through both gateways, to its end, and measures it. */
export async function runRolloutDrill(
  stage: RolloutStage,
  o: { rate: number; startArgs: string[]; endWithin: number; crashWhen?: Array<(r: Rollout) => boolean> },
): Promise<DrillFigures & { crashes: number }> {
  const { two } = stage;
  const load = steadyLoad(two.regions, o.rate, "rollout");
  await Bun.sleep(3000);
  const started = await stage.cli("start", "v2", ...o.startArgs);
  if (started.code !== 0) throw new Error(`rollout start failed: ${started.out}`);
  const nc: NatsConnection = await connectNats(
    two.regions[0].nats.url,
    "rollout-drill",
    two.regions[0].nats.auth("admin"),
  );
  try {
    const kv = await new Kvm(nc).open("rollout_control");
    const crashWhen = [...(o.crashWhen ?? [])];
    let crashes = 0;
    const record = await eventually(
      async () => {
        const r = await readRollout(kv);
        // The service killed -9 at the moments asked for, and started again: it must carry on.
        if (r && crashWhen[0]?.(r)) {
          crashWhen.shift();
          await stage.crashService();
          crashes++;
        }
        return r && ["promoted", "rolledBack", "aborted"].includes(r.state) && r.applied ? r : undefined;
      },
      o.endWithin,
      250,
    ).catch(async (e) => {
      throw new Error(`${(e as Error).message}: the rollout did not end: ${(await stage.cli("history")).out}`);
    });
    // Steady load a little longer on the final assignment, then every acknowledged task must end.
    await Bun.sleep(3000);
    await load.stop();
    const ids = load.acked.map((a) => a.id);
    // Each task's state in its home region's database.
    const states = async () => {
      const out = new Map<string, string>();
      for (const r of two.regions)
        for (const row of await r.db.sql<
          { id: string; state: string }[]
        >`select id, state from tasks where region = ${r.name} and id = any(${ids}::uuid[])`)
          out.set(row.id, row.state);
      return out;
    };
    const ended = (s?: string) => ["completed", "failed", "cancelled"].includes(s ?? "");
    const final = await eventually(
      async () => {
        const s = await states();
        return ids.every((id) => ended(s.get(id))) ? s : undefined;
      },
      120_000,
      500,
    ).catch(async (e) => {
      const s = await states();
      const open = ids.filter((id) => !ended(s.get(id)));
      throw new Error(
        `${(e as Error).message}: ${open.length} task(s) not finished, e.g. ${open
          .slice(0, 5)
          .map((id) => `${id}=${s.get(id) ?? "missing"}`)
          .join(", ")}`,
      );
    });
    const { solvedBy, touched } = await takenUp(two, ids);
    const seconds =
      record.state === "promoted"
        ? (at(record, "applied", "last") - at(record, "start")) / 1000
        : (at(record, "rollback") - at(record, "applied")) / 1000;
    return {
      acknowledged: ids.length,
      lost: ids.filter((id) => !final.has(id)).length,
      failed: ids.filter((id) => final.get(id) === "failed").length,
      extraPaid: two.emu.stats().submissions - ids.length,
      record,
      seconds,
      touchedByCanary: touched.size,
      touchedCompleted: [...touched].filter((id) => final.get(id) === "completed").length,
      solvedBy,
      crashes,
    };
  } finally {
    await nc.close();
  }
}
