// The rollout drills of the fleet (fleet-drills.ts runs them): a new solver version deployed
// beside the running one with `npm run deploy -- solver <version>` (it comes up idle), then
// `rollout start <version>` run on the rollout host as docs/deploy.md says (systemd-run as the
// rollout's user, its env files and credentials), and the rollout service moving the shards.
// - rollout-good: v2 is healthy; promoted at 100 %; no alert may fire.
// - rollout-bad: v3's PROVIDER_URL refuses connections (a bad config shipped with a release); the
//   gate rolls it back; RolloutRolledBack reaches the receiver; the stable version finishes its tasks.
import { BRIDGE_IP, REPO } from "./config.ts";
import { type Log, sleep, waitFor } from "./exec.ts";
import type { DrillContext, FleetDrill } from "./fleet-drills.ts";
import { deployApp, releaseOnce } from "./gapless.ts";
import { inMachineAsync } from "./machine.ts";
import { ensureSecrets, storeFile } from "./secrets.ts";
import type { HostState } from "./state.ts";

/** The rollout CLI on its host, as docs/deploy.md ("Running an app's CLI on a host") runs it. */
async function rolloutCli(h: HostState, args: string): Promise<string> {
  const line = [
    "systemd-run --pipe --wait --collect --quiet --uid=pipeline-rollout --gid=pipeline-rollout",
    "-p EnvironmentFile=/etc/captcha-pipeline/common.env -p EnvironmentFile=/etc/captcha-pipeline/rollout.env",
    "-p LoadCredential=rollout:/etc/captcha-pipeline/credentials/rollout",
    `/opt/captcha-pipeline/rollout/current/rollout ${args}`,
  ].join(" ");
  const r = await inMachineAsync(h, line, { timeoutMs: 60_000 });
  if (r.code !== 0) throw new Error(`${h.name}: rollout ${args}: exit ${r.code}: ${(r.stderr || r.stdout).trim()}`);
  return r.stdout;
}

interface Record_ {
  state: string;
  applied: boolean;
  reason?: string;
  plan: { version: string; stable: string };
}

async function rolloutRecord(h: HostState): Promise<Record_ | null> {
  return (JSON.parse(await rolloutCli(h, "status --json")) as { rollout: Record_ | null }).rollout;
}

/** `npm run deploy -- solver <version>` on every app host (installed beside the running versions, idle). */
async function deploySolver(ctx: DrillContext, version: string, log: Log): Promise<void> {
  const s = ensureSecrets();
  const dist = releaseOnce("solver", version, "rollout", s.signingKey, log);
  const r = await deployApp(
    ["solver", version, "--hosts", ctx.state.inventory!, "--dist", dist, "--ssh-key", s.sshKey].concat(
      ctx.state.secrets === "store" ? ["--secrets", ctx.state.secretsStore ?? storeFile(REPO)] : [],
    ),
    log,
  );
  if (!r.ok) throw new Error(`npm run deploy -- solver ${version}: not deployed on every host`);
}

/** Waits until the rollout of `version` ended and its end was applied; the record. */
async function rolloutEnded(h: HostState, version: string, timeoutMs = 360_000): Promise<Record_> {
  return waitFor(
    `rollout ${version} ended and applied`,
    timeoutMs,
    async () => {
      const r = await rolloutRecord(h).catch(() => null);
      return r && r.plan.version === version && r.state !== "running" && r.state !== "paused" && r.applied
        ? r
        : undefined;
    },
    2000,
  );
}

const START = "--steps 50,100 --bake 20s --deadline 4m --gate minTasks=15";

function rolloutDrill(o: { name: string; version: string; bad: boolean }): FleetDrill {
  let ended: Promise<Record_> | undefined;
  return {
    name: o.name,
    alert: o.bad ? "RolloutRolledBack" : undefined,
    role: "app",
    index: 0,
    what: o.bad
      ? `solver ${o.version} deployed with a PROVIDER_URL that refuses connections, then \`rollout start ${o.version} ${START}\``
      : `solver ${o.version} deployed beside the running version, then \`rollout start ${o.version} ${START}\``,
    // The deploy comes before the drill's clock (prepare): the fault is the rollout itself.
    prepare: async (_h, ctx) => {
      await deploySolver(ctx, o.version, ctx.log);
      if (o.bad)
        for (const a of ctx.state.hosts.filter((x) => x.role === "app")) {
          const r = await inMachineAsync(
            a,
            `echo 'PROVIDER_URL=http://${BRIDGE_IP}:9' >> /etc/captcha-pipeline/solver@${o.version}.env && systemctl restart solver@${o.version}.service`,
          );
          if (r.code !== 0) throw new Error(`${a.name}: solver@${o.version}: ${r.stderr.trim()}`);
        }
      // Its heartbeats reach the rollout before its first step (the rollout waits for them anyway).
      await sleep(5000);
    },
    inject: async (h, ctx) => {
      ctx.log(`${h.name}: ${(await rolloutCli(h, `start ${o.version} ${START}`)).trim().split("\n")[0]}`);
      ended = rolloutEnded(h, o.version);
    },
    undo: async (_h, ctx) => {
      const r = await ended!;
      ctx.log(`rollout ${o.version}: ${r.state} (${r.reason ?? ""})`);
      const want = o.bad ? "rolledBack" : "promoted";
      if (r.state !== want) throw new Error(`rollout ${o.version} ended ${r.state}, not ${want}: ${r.reason}`);
    },
  };
}

export const ROLLOUT_DRILLS: FleetDrill[] = [
  rolloutDrill({ name: "rollout-good", version: "v2", bad: false }),
  rolloutDrill({ name: "rollout-bad", version: "v3", bad: true }),
];
