// `npm run rollout -- <command>`: rollouts of a solver version across the regions, and the shard
// assignment underneath. Exit codes: 0 done, 1 failed, 2 usage or configuration error, 3 refused
// (the record's state does not allow the command).
import { ConfigError } from "@pipeline/shared/config";
import { openDatabase } from "@pipeline/shared/db";
import { devStackEnv, devStackFile, readDevStack } from "@pipeline/shared/localstack";
import { consumerVersions, readAssignment, reconcileConsumers, shareOf } from "@pipeline/shared/runtime";
import { z } from "zod";
import { loadConfig, regionEndpoints, type RolloutConfig } from "./config.ts";
import { command, isEnded, withLog, type Rollout } from "./plan.ts";
import { audit, openRegionLink, type RegionLink } from "./regions.ts";
import { describeAssignment, shardCount, shiftTo, versionsOf } from "./shift.ts";
import { parseStartArgs, planOf } from "./start-args.ts";
import { createRolloutStore, openControlBucket, type RolloutStore } from "./store.ts";

const USAGE = `usage: npm run rollout -- <command> [--json]
  start <version> [--steps 5,25,50,100] [--regions fsn1,hel1] [--stable v1] [--bake 60s] [--deadline 10m] [--gate minTasks=20,...]
                             start a rollout (the rollout service carries it out)
  status                     the rollout, and per region which version pulls which shard and runs how many processes
  pause | resume | promote | abort
                             change the running rollout (promote: 100% in the current region; abort: every region back to stable)
  history                    the rollout's decisions with the gate figures behind each
  serve                      run the rollout service (as apps/rollout/src/main.ts)
  shift <version> <N|P%>     by hand: give <version> N shards (or P%) of REGION, taken from the other versions
  reconcile [--also v2,v3]   make REGION's lane consumers match its assignment (after an interrupted shift)
Environment: NATS_URL, NATS_USER/NATS_PASSWORD or NATS_CREDS (the rollout user), REGION, REGIONS,
NATS_URL_<REGION>... for the other regions, DATABASE_URL (the audit log), ACK_WAIT_MS.`;

const Version = z.string().regex(/^[a-z0-9_]{1,32}$/, "lower-case letters, digits and '_'");

interface Ctx {
  config: RolloutConfig;
  links: RegionLink[];
  home: RegionLink;
  store: RolloutStore;
  json: boolean;
  by: string;
  auditTo: (action: string, detail: Record<string, unknown>) => Promise<void>;
}

function show(ctx: Ctx, value: unknown, text: string) {
  console.log(ctx.json ? JSON.stringify(value) : text);
}

async function start(ctx: Ctx, args: string[]): Promise<number> {
  const a = parseStartArgs(args);
  const cur = await ctx.store.read();
  if (cur && !isEnded(cur.record)) {
    console.error(`rollout start: rollout ${cur.record.id} is ${cur.record.state}; abort it or let it end first`);
    return 3;
  }
  const regions = a.regions ?? ctx.links.map((l) => l.name);
  const first = ctx.links.find((l) => l.name === regions[0]);
  const assignment = first ? await first.assignment() : undefined;
  if (!assignment) throw new Error(`region ${regions[0]} has no shard assignment yet (no solver has started there), or is not configured`);
  // The stable version: the one that pulls most shards of the first region.
  const share = shareOf(assignment);
  const stable = Object.entries(share).sort((x, y) => y[1] - x[1])[0]![0];
  const plan = planOf(a, { stable, regions });
  for (const r of plan.regions) if (!ctx.links.some((l) => l.name === r)) throw new Error(`region ${r} is not configured (REGIONS, NATS_URL_${r.toUpperCase()})`);
  const now = new Date();
  const record: Rollout = withLog(
    { id: `${plan.version}-${now.toISOString().replace(/[-:.TZ]/g, "").slice(0, 14)}`, plan, state: "running", region: 0, step: 0, stepStartedAt: now.getTime(), applied: false, createdAt: now.toISOString(), by: ctx.by, log: [] },
    { action: "start", why: `${plan.version} replaces ${plan.stable} in ${plan.regions.join(" then ")}, steps ${plan.steps.join("/")}%` },
    now,
  );
  if ((await ctx.store.write(record, cur?.revision ?? 0)) === undefined) throw new Error("the rollout record changed meanwhile; try again");
  await ctx.auditTo("rollout.start", { id: record.id, plan });
  show(ctx, record, `started ${record.id}: ${record.log[0]!.why}`);
  return 0;
}

async function change(ctx: Ctx, verb: "pause" | "resume" | "promote" | "abort"): Promise<number> {
  for (let i = 0; i < 5; i++) {
    const cur = await ctx.store.read();
    if (!cur) {
      console.error(`rollout ${verb}: there is no rollout`);
      return 3;
    }
    const r = command(cur.record, verb, Date.now(), ctx.by);
    if ("refused" in r) {
      console.error(`rollout ${verb}: refused: ${r.refused}`);
      return 3;
    }
    const next = withLog(r.next, { action: verb, why: r.next.reason ?? verb }, new Date());
    if ((await ctx.store.write(next, cur.revision)) === undefined) continue;
    await ctx.auditTo(`rollout.${verb}`, { id: next.id, state: next.state, region: next.plan.regions[next.region], step: next.plan.steps[next.step] });
    show(ctx, next, `${verb}: rollout ${next.id} is ${next.state}${next.applied ? "" : " (the rollout service moves the shards)"}`);
    return 0;
  }
  throw new Error("the rollout record kept changing; try again");
}

async function status(ctx: Ctx): Promise<number> {
  const cur = await ctx.store.read();
  const regions: Record<string, unknown> = {};
  const lines: string[] = [];
  if (cur) {
    const r = cur.record;
    lines.push(`rollout ${r.id}: ${r.plan.version} replacing ${r.plan.stable}, ${r.state}${r.state === "running" || r.state === "paused" ? ` at ${r.plan.steps[r.step]}% in ${r.plan.regions[r.region]}` : ""}${r.applied ? "" : " (not applied yet)"}${r.reason ? ` (${r.reason})` : ""}`);
    const last = r.log.at(-1);
    if (last) lines.push(`  last: ${last.at} ${last.action}: ${last.why}`);
  } else lines.push("no rollout");
  for (const l of ctx.links) {
    try {
      const a = await l.assignment();
      const processes: Record<string, number> = {};
      for (const b of (await l.heartbeats([])).beats) processes[b.version] = (processes[b.version] ?? 0) + 1;
      regions[l.name] = { share: a ? shareOf(a) : {}, processes };
      lines.push(`region ${l.name}: processes ${Object.entries(processes).map(([v, n]) => `${v} ${n}`).join(", ") || "none"}`, ...(a ? describeAssignment(a).split("\n").map((x) => `  ${x}`) : ["  no assignment yet"]));
    } catch (err) {
      regions[l.name] = { error: (err as Error).message };
      lines.push(`region ${l.name}: unreachable (${(err as Error).message})`);
    }
  }
  show(ctx, { rollout: cur?.record ?? null, revision: cur?.revision ?? null, regions }, lines.join("\n"));
  return 0;
}

async function history(ctx: Ctx): Promise<number> {
  const cur = await ctx.store.read();
  if (!cur) {
    show(ctx, [], "no rollout");
    return 0;
  }
  const r = cur.record;
  const fig = (f: Record<string, unknown> | undefined) => {
    const c = f?.canary as { tasks?: number; failed?: number; p95Ms?: number | null } | undefined;
    const s = f?.stable as typeof c;
    return c && s ? ` [canary ${c.tasks} tasks, ${c.failed} troubled, p95 ${c.p95Ms ?? "-"} ms; stable ${s.tasks}, ${s.failed}, ${s.p95Ms ?? "-"} ms]` : "";
  };
  show(ctx, r.log, [`rollout ${r.id} (${r.state})`, ...r.log.map((e) => `${e.at} ${e.action}${e.region ? ` ${e.region}` : ""}${e.percent ? ` ${e.percent}%` : ""}: ${e.why}${fig(e.figures)}`)].join("\n"));
  return 0;
}

async function shards(ctx: Ctx, verb: "shift" | "reconcile", rest: string[], also: string[]): Promise<number> {
  const l = ctx.home;
  if (verb === "shift") {
    const version = Version.safeParse(rest[0]);
    if (!version.success || rest.length !== 2) {
      console.error(`rollout shift: takes <version> <N|P%>\n\n${USAGE}`);
      return 2;
    }
    const cur = await readAssignment(l.shards);
    let count: number;
    try {
      count = shardCount(rest[1]!, cur?.assignment.owners.length ?? 16);
    } catch (err) {
      console.error(`rollout shift: ${(err as Error).message}`);
      return 2;
    }
    const r = await shiftTo({ jsm: l.jsm, kv: l.shards, region: l.name, to: version.data, count, by: ctx.by, ackWaitMs: ctx.config.ACK_WAIT_MS, versions: also });
    await ctx.auditTo("rollout.shift", { region: l.name, version: version.data, moved: r.moved });
    show(ctx, r, `moved ${r.moved.length ? r.moved.join(",") : "nothing"} to ${version.data}; now ${Object.entries(r.share).map(([v, n]) => `${v} ${n}`).join(", ")}; consumers changed: ${r.changed.length}`);
    return 0;
  }
  const cur = await readAssignment(l.shards);
  if (!cur) throw new Error(`region ${l.name} has no assignment yet`);
  const r = await reconcileConsumers(l.jsm, l.name, cur.assignment, versionsOf(cur.assignment, [...(await consumerVersions(l.jsm, l.name)), ...also]), ctx.config.ACK_WAIT_MS);
  show(ctx, r, `reconciled: ${r.changed.length ? r.changed.join(", ") : "nothing to change"}`);
  return 0;
}

async function main(argv: string[]): Promise<number> {
  const json = argv.includes("--json");
  const alsoAt = argv.indexOf("--also");
  const also = alsoAt >= 0 ? (argv[alsoAt + 1] ?? "").split(",").filter(Boolean) : [];
  const args = argv.filter((a, i) => a !== "--json" && (alsoAt < 0 || (i !== alsoAt && i !== alsoAt + 1)));
  const [verb, ...rest] = args;
  if (!verb || verb === "help" || verb === "--help") {
    console.log(USAGE);
    return verb ? 0 : 2;
  }
  let env = process.env as Record<string, string | undefined>;
  if (!env.NATS_URL) {
    const stack = readDevStack(devStackFile(env));
    if (stack) env = { ...env, ...devStackEnv(stack, "rollout", env) };
  }
  if (verb === "serve") {
    Object.assign(process.env, env);
    await import("./main.ts");
    return await new Promise<number>(() => {});
  }
  let config;
  let endpoints;
  try {
    config = loadConfig(env);
    for (const v of also) Version.parse(v);
    endpoints = regionEndpoints(config, env, { needDatabase: false });
  } catch (err) {
    console.error(`rollout: ${err instanceof ConfigError ? err.message : (err as Error).message}`);
    return 2;
  }
  const links: RegionLink[] = [];
  const db = config.DATABASE_URL ? openDatabase(config.DATABASE_URL, { max: 1, appName: "rollout-cli" }) : undefined;
  try {
    // Only the home region for commands on the record; every region to start or show.
    for (const e of endpoints) if (e.name === config.REGION || ["start", "status"].includes(verb)) links.push(await openRegionLink({ ...e, databaseUrl: undefined }, "rollout-cli"));
    const home = links.find((l) => l.name === config.REGION)!;
    const by = `rollout-cli ${process.env.USER ?? "?"}`;
    const ctx: Ctx = {
      config,
      links,
      home,
      store: createRolloutStore(await openControlBucket(home.nc)),
      json,
      by,
      auditTo: (action, detail) => audit(db, by, action, detail),
    };
    switch (verb) {
      case "start":
        return await start(ctx, rest);
      case "status":
        return await status(ctx);
      case "history":
        return await history(ctx);
      case "pause":
      case "resume":
      case "promote":
      case "abort":
        return await change(ctx, verb);
      case "shift":
      case "reconcile":
        return await shards(ctx, verb, rest, also);
    }
    console.error(`rollout: unknown command ${JSON.stringify(verb)}\n\n${USAGE}`);
    return 2;
  } catch (err) {
    const msg = (err as Error).message;
    console.error(`rollout ${verb}: ${msg}`);
    return msg.startsWith("start:") ? 2 : 1;
  } finally {
    for (const l of links) await l.close();
    await db?.close();
  }
}

process.exit(await main(Bun.argv.slice(2)));
