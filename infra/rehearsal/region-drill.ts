// The region-cut drill (fleet-drills.ts runs it on a two-region fleet): the home region's hosts cut
// off from the other region and the witness, as a lost inter-region link would. Each of its hosts
// gets an nftables table of its own dropping traffic to and from the other regions' subnets (the
// host side, where the provider and the clients are, stays reachable). The region can no longer
// renew its lease at the witness and fences itself (RegionFenced); the other region takes its
// lease over and finishes the tasks it can resume from its mirror; after the page the cut heals
// and the region serves again (failback).
import { BRIDGE_IP } from "./config.ts";
import { type Log, waitFor } from "./exec.ts";
import type { DrillContext, FleetDrill } from "./fleet-drills.ts";
import { inMachineAsync, powerOff, powerOnAgain } from "./machine.ts";
import type { HostState } from "./state.ts";

/** The /24s of every host outside `region` (the other regions, the witness). */
export function otherSubnets(hosts: HostState[], region: string): string[] {
  const nets = hosts.filter((h) => h.region !== region).map((h) => `${h.ip.split(".").slice(0, 3).join(".")}.0/24`);
  return [...new Set(nets)].sort();
}

/** The cut as one nftables table: in and out, ahead of the host's own firewall (priority -10). */
export function cutRuleset(subnets: string[], table = "rh_cut"): string {
  const set = `{ ${subnets.join(", ")} }`;
  return [
    `table inet ${table} {`,
    `  chain in { type filter hook input priority -10; ip saddr ${set} drop; }`,
    `  chain out { type filter hook output priority -10; ip daddr ${set} drop; }`,
    "}",
    "",
  ].join("\n");
}

async function onEach(hosts: HostState[], script: string, input?: string): Promise<void> {
  await Promise.all(
    hosts.map(async (h) => {
      const r = await inMachineAsync(h, script, { timeoutMs: 30_000, ...(input ? { input } : {}) });
      if (r.code !== 0) throw new Error(`${h.name}: ${script}: ${r.stderr.trim()}`);
    }),
  );
}

/** Whether the region's recovery may submit again (its lease renewed): recovery_region_may_submit 1. */
async function maySubmit(app: HostState): Promise<boolean> {
  try {
    const text = await (await fetch(`http://${app.ip}:9477/metrics`, { signal: AbortSignal.timeout(3000) })).text();
    return /^recovery_region_may_submit\{[^}]*\} 1$/m.test(text);
  } catch {
    return false;
  }
}

const regionHosts = (all: HostState[], region: string) => all.filter((h) => h.region === region);

export const REGION_CUT: FleetDrill = {
  name: "region-cut",
  alert: "RegionFenced",
  role: "app",
  index: 0,
  twoRegions: true,
  what: "every host of the region cut off from the other region and the witness (nftables on each), healed after the page",
  inject: async (h, ctx) => {
    const subnets = otherSubnets(ctx.state.hosts, h.region);
    await onEach(regionHosts(ctx.state.hosts, h.region), "nft -f -", cutRuleset(subnets));
    ctx.log(`region-cut: ${h.region} cut off from ${subnets.join(", ")}`);
  },
  undo: async (h, ctx) => {
    await onEach(regionHosts(ctx.state.hosts, h.region), "nft delete table inet rh_cut");
    const healedAt = Date.now();
    await waitUntilServing(h, ctx.log);
    return { healedAt };
  },
};

async function waitUntilServing(app: HostState, log: Log): Promise<void> {
  const t0 = Date.now();
  await waitFor(`${app.region}: its lease renewed (recovery_region_may_submit 1)`, 120_000, async () =>
    (await maySubmit(app)) ? true : undefined,
  );
  log(`region-cut: ${app.region} may submit again ${((Date.now() - t0) / 1000).toFixed(1)} s after the heal`);
}

const appsOf = (ctx: DrillContext, region: string) =>
  ctx.state.hosts.filter((h) => h.role === "app" && h.region === region);

/**
 * Every app host of the home region powered off at once (its gateways, solvers and recovery gone;
 * its LB, NATS and Postgres up). The clients know the region's URL alone: its LB sends them to
 * the other region's gateways (HAProxy's backup servers), and the other region, once the lapsed
 * lease is its own, finishes the tasks it can resume. Powered on again after the page.
 */
export const REGION_APPS_OFF: FleetDrill = {
  name: "region-apps-off",
  alert: "HostDown",
  role: "app",
  index: 0,
  twoRegions: true,
  clients: "home",
  what: "every app host of the region powered off at once; the clients know its LB's URL alone",
  inject: async (h, ctx) => {
    for (const a of appsOf(ctx, h.region)) powerOff(a, a.nspawnPid);
  },
  undo: async (h, ctx) => {
    const healedAt = Date.now();
    await Promise.all(appsOf(ctx, h.region).map((a) => powerOnAgain(a, ctx.state, ctx.log)));
    await waitUntilServing(h, ctx.log);
    return { healedAt };
  },
};

/**
 * The whole region lost to its clients: every host cut off from the other region and the witness
 * (as region-cut), and its LB unreachable from the host side, where the clients and the name
 * server's checks come from (a location gone from the internet). The clients know the shared name
 * alone (SHARED_NAME, through the failover name server): it must stop naming the lost region's LB
 * and name it again after the heal, with no task lost or answered twice across both moves.
 */
let lostAt = 0;

interface NameServerStatus {
  answer: string[];
  changes: Array<{ at: string; region: string; inRotation: boolean; answer: string[] }>;
}

async function nameServerStatus(ctx: DrillContext): Promise<NameServerStatus> {
  const url = ctx.state.services.dnsStatusUrl;
  if (!url) throw new Error("the fleet has no name server (state.json's services.dnsStatusUrl)");
  return (await (await fetch(url, { signal: AbortSignal.timeout(3000) })).json()) as NameServerStatus;
}

export const REGION_LOST: FleetDrill = {
  name: "region-lost",
  alert: "RegionFenced",
  role: "app",
  index: 0,
  twoRegions: true,
  clients: "shared",
  what: "the region cut off from the other region and the witness, its LB from the internet; clients know the shared name alone",
  inject: async (h, ctx) => {
    await REGION_CUT.inject(h, ctx);
    const lb = ctx.state.hosts.find((x) => x.role === "lb" && x.region === h.region)!;
    await onEach([lb], "nft -f -", cutRuleset([`${BRIDGE_IP}/32`], "rh_lost"));
    lostAt = Date.now();
    ctx.log(`region-lost: ${lb.name} unreachable from ${BRIDGE_IP} (the clients, the name server)`);
  },
  undo: async (h, ctx) => {
    const lb = ctx.state.hosts.find((x) => x.role === "lb" && x.region === h.region)!;
    await onEach([lb], "nft delete table inet rh_lost");
    const healed = await REGION_CUT.undo(h, ctx);
    await waitFor(`${ctx.state.sharedUrl}: ${lb.ip} named again`, 60_000, async () =>
      (await nameServerStatus(ctx)).answer.includes(lb.ip) ? true : undefined,
    );
    for (const c of (await nameServerStatus(ctx)).changes.filter((x) => Date.parse(x.at) >= lostAt))
      ctx.log(
        `region-lost: name server: ${c.region} ${c.inRotation ? "back in rotation" : "out of rotation"} ${((Date.parse(c.at) - lostAt) / 1000).toFixed(1)} s after the loss (answer ${c.answer.join(", ")})`,
      );
    return healed;
  },
};
