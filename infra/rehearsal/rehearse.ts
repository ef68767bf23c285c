// `npm run rehearse [-- up|down|status|drills [name...]|alerts|deploy-gapless [--no-drain]]`: a production rehearsal on real systemd (infra/rehearsal/README.md).
import { type LbClient, nameLookup } from "./client.ts";
import { BRIDGE, BRIDGE_IP, parseRegions } from "./config.ts";
import { runDrills } from "./drills.ts";
import { FLEET_DRILLS, runFleetDrills } from "./fleet-drills.ts";
import { gaplessMain } from "./gapless.ts";
import { ensureSecrets } from "./secrets.ts";
import { readState, type State } from "./state.ts";
import { down, fleetTable, status, up } from "./up.ts";

const log = (m: string) => console.error(`[rehearse] ${m}`);
const cmd = Bun.argv[2] && !Bun.argv[2].startsWith("--") ? Bun.argv[2] : "up";

if (cmd === "up") {
  try {
    const at = Bun.argv.indexOf("--regions");
    const r = await up(log, { regions: parseRegions(at > 0 ? Bun.argv[at + 1] : undefined) });
    console.log(
      `fleet (regions ${r.state.regions?.join(", ")}, bridge ${BRIDGE} ${BRIDGE_IP}):\n${fleetTable(r.state.hosts)}`,
    );
    console.log(`  emulator       ${r.state.services.emulatorUrl} (host)`);
    for (const [region, url] of Object.entries(r.state.lbUrls ?? {}))
      console.log(`load balancer ${region}: ${url}  (CA ${r.state.caFile}; API key: state.json's apiKey)`);
    if (r.state.sharedUrl)
      console.log(
        `shared name: ${r.state.sharedUrl} (failover name server ${r.state.services.dnsServer}, status ${r.state.services.dnsStatusUrl})`,
      );
    console.log(`first task through the LB: ${r.firstTask.id} ${r.firstTask.status} in ${r.firstTask.ms} ms`);
    console.log(
      `alerts: Alertmanager on fsn1-mon-1 posts to ${r.state.services.alertsUrl}/alerts/hook (Slack JSON); they land in ${r.state.services.alertsLog} (\`alert <name> after S s\`) and GET ${r.state.services.alertsUrl}/alerts`,
    );
    console.log(`timings: ${JSON.stringify(r.state.timings)}`);
    for (const h of r.state.hosts) console.log(`  boot ${h.name}: ${h.bootMs} ms`);
    process.exit(0);
  } catch (err) {
    log(`up failed: ${(err as Error).message}`);
    log(
      "the machines are left running for a look (`npm run rehearse -- status`); `npm run rehearse -- down` stops them",
    );
    process.exit(1);
  }
} else if (cmd === "down") {
  const r = await down(log);
  console.log(`down in ${r.seconds} s`);
} else if (cmd === "status") {
  const s = status();
  if (!s.state) console.log("no rehearsal is up");
  else {
    console.log(`rehearsal ${s.state.phase}, started ${s.state.startedAt}\n${fleetTable(s.hosts)}`);
    console.log(
      `load balancer: ${s.state.lbUrl ?? "-"}; bridge ${BRIDGE}: ${s.bridge ? `up, ports ${s.ports.join(" ")}` : "absent"}`,
    );
  }
} else if (cmd === "alerts" || cmd === "drills") {
  const state = readState();
  if (state?.phase !== "up" || !state.services.alertsUrl) {
    console.error("no rehearsal with a monitoring host is up: `npm run rehearse` first");
    process.exit(1);
  }
  process.exit(cmd === "alerts" ? await alertsAtOnce(state) : await fleetDrills(state, Bun.argv.slice(3)));
} else if (cmd === "deploy-gapless") {
  process.exit(await gaplessMain(Bun.argv.slice(3), log));
} else {
  console.error(
    "usage: npm run rehearse -- [up [--regions fsn1,hel1]|down|status|drills [name...]|alerts|deploy-gapless [--no-drain] [--version v2]]",
  );
  process.exit(2);
}

/** `alerts`: 4 faults at once (AppDown, HostDown, NatsDown, PostgresDown), one line per page. */
async function alertsAtOnce(state: State): Promise<number> {
  console.log(
    `faults at once (AppDown, HostDown, NatsDown, PostgresDown); alerts at ${state.services.alertsUrl}/alerts`,
  );
  const results = await runDrills(state, log);
  for (const r of results)
    console.log(
      r.afterMs !== undefined
        ? `alert ${r.alert} after ${(r.afterMs / 1000).toFixed(1)} s (${r.host})`
        : `no ${r.alert}: ${r.error}`,
    );
  return results.every((r) => r.afterMs !== undefined) ? 0 : 1;
}

/** `drills [name...]`: the fleet drills (fleet-drills.ts) under load through the LB, one after another. */
async function fleetDrills(state: State, names: string[]): Promise<number> {
  const s = ensureSecrets();
  if (!state.lbUrl || !state.apiKey) throw new Error("the rehearsal's state has no load balancer URL or API key");
  console.log(
    `drills: ${(names.length ? names : FLEET_DRILLS.map((d) => d.name)).join(", ")} (4 tasks/s through ${state.lbUrl})`,
  );
  const results = await runFleetDrills(
    {
      state,
      client: { url: state.lbUrl, ca: s.caPem, apiKey: state.apiKey },
      ...other(state, s.caPem),
      ...(state.sharedUrl && state.services.dnsServer && state.apiKey
        ? {
            shared: {
              url: state.sharedUrl,
              ca: s.caPem,
              apiKey: state.apiKey,
              dns: nameLookup(state.services.dnsServer, new URL(state.sharedUrl).hostname),
            },
          }
        : {}),
      log,
    },
    names,
  );
  const failed = results.filter((r) => !r.passed).map((r) => r.name);
  console.log(failed.length ? `drills failed: ${failed.join(", ")}` : `drills passed: ${results.length}`);
  return failed.length ? 1 : 0;
}

/** The other region's LB, when the fleet has two (the drills' clients know both URLs). */
function other(state: State, ca: string): { other?: LbClient } {
  const url = Object.values(state.lbUrls ?? {}).find((u) => u !== state.lbUrl);
  return url && state.apiKey ? { other: { url, ca, apiKey: state.apiKey } } : {};
}
