// One host's deploy: install the release beside the others, switch, restart, wait for health, and
// put the previous release back when the new one does not come up. docs/deploy.md walks through it.
// The deploy user reads what is world-readable (releases, `current`) itself; everything it changes
// as root goes through sudo: systemctl for the app units, and the host's install script
// (infra/deploy/scripts/captcha-pipeline-install.sh), which installs only signed releases and
// writes the app's credentials (read from its stdin, never from a command line) before the restart.
import type { Host } from "./inventory.ts";
import type { Rotation } from "./lb.ts";
import { archOf, type DeployApp, releasesToPrune, solverPort, unitOf } from "./plan.ts";
import { q, type Ssh } from "./ssh.ts";

/** The service manager, run with sudo: the path the deploy user's sudoers rule names, whatever the login's PATH. */
const SYSTEMCTL = "/usr/bin/systemctl";

export interface LocalBinary {
  path: string;
  sha256: string;
  /** The base64 of `<binary>.sha256.sig` (npm run build), which the host checks before installing. */
  signature: string;
}

export interface HostDeployDeps {
  ssh: Ssh;
  /** The checked binary of `app` at `version` for an architecture (built when missing). */
  binary(arch: "x64" | "arm64"): Promise<LocalBinary>;
  log(line: string): void;
  healthTimeoutMs: number;
  keep: number;
  /**
   * The app's credentials for this host, as `captcha-pipeline-install credentials` reads them on
   * stdin (secret-catalog.ts credentialPayload); they are written before the unit (re)starts.
   */
  credentials(host: Host): string;
  sleep?: (ms: number) => Promise<void>;
  /** The load balancer the host leaves before its restart and rejoins once healthy (the gateway with an inventory `lb`). */
  rotation?: Rotation;
}

export type HostOutcome =
  | { host: string; status: "deployed"; version: string; previous?: string; ms: number; pruned: string[] }
  | {
      host: string;
      status: "rolled-back";
      version: string;
      previous?: string;
      ms: number;
      reason: string;
      rollbackHealthy: boolean;
    }
  | { host: string; status: "failed"; version: string; ms: number; reason: string };

/** One host's deploy as the steps below share it: where things are, how to run root's commands. */
interface HostRun {
  host: Host;
  app: DeployApp;
  version: string;
  d: HostDeployDeps;
  t0: number;
  appDir: string;
  unit: string;
  say(m: string): void;
  /** systemctl `verb` of `u` (the app's unit by default), through sudo. */
  ctl(verb: string, u?: string): string;
  /** The install script with `args`, through sudo. */
  install(args: string): string;
}

export async function deployHost(host: Host, app: DeployApp, version: string, d: HostDeployDeps): Promise<HostOutcome> {
  // Root's own commands need no sudo (a host bootstrapped before the deploy user; not the default).
  const asRoot = (cmd: string) => (host.ssh.user === "root" ? cmd : `sudo -n ${cmd}`);
  const unit = unitOf(app, version);
  const r: HostRun = {
    host,
    app,
    version,
    d,
    t0: Date.now(),
    appDir: `${host.root}/${app}`,
    unit,
    say: (m) => d.log(`[${host.name}] ${m}`),
    ctl: (verb, u = unit) => asRoot(`${SYSTEMCTL} ${verb} ${q(u)}`),
    install: (args) => asRoot(`${q(host.install)} ${args}`),
  };
  try {
    await installRelease(r);
    await deliverCredentials(r);
    return app === "solver" ? await solverSwitch(r) : await switchAndCheck(r);
  } catch (err) {
    const reason = (err as Error).message;
    r.say(`failed: ${reason}`);
    return { host: host.name, status: "failed", version, ms: Date.now() - r.t0, reason };
  }
}

/** The signed binary into releases/<version>/, unless the same one is there already. */
async function installRelease(r: HostRun): Promise<void> {
  const { host, app, version, d } = r;
  const rel = `${r.appDir}/releases/${version}`;
  const arch = archOf(await d.ssh.check(host, "uname", "uname -m"));
  const bin = await d.binary(arch);
  const present = (
    await d.ssh.check(
      host,
      "inspect release",
      `if [ -f ${q(`${rel}/${app}`)} ]; then sha256sum < ${q(`${rel}/${app}`)} | cut -d' ' -f1; fi`,
    )
  ).trim();
  if (present === bin.sha256) return r.say(`${version} (${arch}) already installed, checksum ok`);
  await d.ssh.check(
    host,
    "install release",
    r.install(`release ${app} ${version} ${arch} ${bin.sha256} ${q(bin.signature)}`),
    { input: bin.path, timeoutMs: 600_000 },
  );
  r.say(`copied ${version} (${arch}): signature and checksum ${bin.sha256.slice(0, 12)}… verified on the host`);
}

/** The app's credentials, 0600 root under /etc/captcha-pipeline/credentials/<app>/, sent on stdin. */
async function deliverCredentials(r: HostRun): Promise<void> {
  const said = await r.d.ssh.check(r.host, "write credentials", r.install(`credentials ${r.app}`), {
    stdin: r.d.credentials(r.host),
  });
  r.say(said.trim().split("\n").pop() ?? `credentials of ${r.app} written`);
}

/** gateway, recovery, rollout: `current` to the new release, restart, health; the previous release back otherwise. */
async function switchAndCheck(r: HostRun): Promise<HostOutcome> {
  const { host, app, version, d, unit } = r;
  const previous =
    (await d.ssh.check(host, "read current", `readlink ${q(`${r.appDir}/current`)} || true`))
      .trim()
      .replace(/^releases\//, "") || undefined;
  const point = (v: string) => r.install(`switch ${app} ${v}`);
  await d.ssh.check(host, "switch current", point(version));
  if (d.rotation) r.say(await d.rotation.out(host));
  await d.ssh.check(host, "restart", r.ctl("restart"));
  r.say(`current -> ${version} (was ${previous ?? "none"}); ${unit} restarted`);
  const health = await waitHealthy(r);
  if (health.ok) {
    r.say(`healthy after ${health.ms} ms`);
    if (d.rotation) r.say(await d.rotation.in(host));
    const pruned = await prune(r, new Set([version]));
    return {
      host: host.name,
      status: "deployed",
      version,
      ...(previous ? { previous } : {}),
      ms: Date.now() - r.t0,
      pruned,
    };
  }
  r.say(`NOT healthy within ${d.healthTimeoutMs} ms (${health.last}): rolling back`);
  if (!previous || previous === version) {
    await d.ssh.run(host, r.ctl("stop"));
    return {
      host: host.name,
      status: "rolled-back",
      version,
      ms: Date.now() - r.t0,
      reason: `unhealthy: ${health.last}; no previous release, ${unit} stopped`,
      rollbackHealthy: false,
    };
  }
  await d.ssh.check(host, "switch back", point(previous));
  await d.ssh.check(host, "restart previous", r.ctl("restart"));
  const back = await waitHealthy(r);
  if (back.ok && d.rotation) r.say(await d.rotation.in(host));
  r.say(
    back.ok
      ? `rolled back to ${previous}: healthy after ${back.ms} ms`
      : `rolled back to ${previous}, which is NOT healthy either (${back.last})`,
  );
  return {
    host: host.name,
    status: "rolled-back",
    version,
    previous,
    ms: Date.now() - r.t0,
    reason: `unhealthy: ${health.last}`,
    rollbackHealthy: back.ok,
  };
}

/** The solver: the new version starts beside the running ones (the rollout service moves work). */
async function solverSwitch(r: HostRun): Promise<HostOutcome> {
  const { host, version, d, unit } = r;
  const ports = new Map<string, number>();
  const listing = await d.ssh.check(host, "read solver ports", r.install("ports"));
  for (const line of listing.split("\n")) {
    const m = /^solver@([a-z0-9_]+) (\d+)$/.exec(line.trim());
    if (m) ports.set(m[1]!, Number(m[2]));
  }
  const port = solverPort(version, ports);
  if (!ports.has(version)) await d.ssh.check(host, "write solver env", r.install(`solver-port ${version} ${port}`));
  await d.ssh.check(host, "start solver", `${r.ctl("enable")}\n${r.ctl("restart")}`);
  r.say(
    `${unit} started beside ${[...ports.keys()].filter((v) => v !== version).join(", ") || "no other version"} (metrics port ${port})`,
  );
  const health = await waitHealthy(r, port);
  if (health.ok) {
    r.say(`healthy after ${health.ms} ms`);
    const running = new Set<string>([version]);
    for (const v of ports.keys())
      if ((await d.ssh.run(host, r.ctl("is-active --quiet", `solver@${v}.service`))).code === 0) running.add(v);
    return { host: host.name, status: "deployed", version, ms: Date.now() - r.t0, pruned: await prune(r, running) };
  }
  r.say(
    `NOT healthy within ${d.healthTimeoutMs} ms (${health.last}): stopping ${unit}; the running versions are untouched`,
  );
  await d.ssh.run(host, `${r.ctl("disable")}\n${r.ctl("stop")}`);
  return {
    host: host.name,
    status: "rolled-back",
    version,
    ms: Date.now() - r.t0,
    reason: `unhealthy: ${health.last}`,
    rollbackHealthy: true,
  };
}

/** Gateway and solver: /readyz answers 200; recovery and rollout (no HTTP for sure): the unit stays active for 3 probes in a row. */
async function waitHealthy(r: HostRun, solverMetricsPort?: number): Promise<{ ok: boolean; ms: number; last: string }> {
  const { app, d, host } = r;
  const start = Date.now();
  const sleep = d.sleep ?? ((ms: number) => Bun.sleep(ms));
  const probe =
    app === "recovery" || app === "rollout"
      ? r.ctl("is-active --quiet")
      : app === "solver"
        ? `curl -fsS -m 2 http://127.0.0.1:${solverMetricsPort}/readyz`
        : `port=$(${r.install("ports")} | sed -n 's/^gateway //p')\ncurl -fsS -m 2 "http://127.0.0.1:\${port:-8080}/readyz"`;
  let streak = 0;
  let last = "no answer yet";
  while (Date.now() - start < d.healthTimeoutMs) {
    const res = await d.ssh.run(host, probe, { timeoutMs: 15_000 });
    if (res.code === 0) {
      if ((app !== "recovery" && app !== "rollout") || ++streak >= 3)
        return { ok: true, ms: Date.now() - start, last: "ok" };
    } else {
      streak = 0;
      last = (res.stderr.trim() || res.stdout.trim() || `exit ${res.code}`).split("\n").pop()!;
    }
    await sleep(1000);
  }
  return { ok: false, ms: Date.now() - start, last };
}

/** Keeps the newest `keep` releases (and every one in use). */
async function prune(r: HostRun, inUse: Set<string>): Promise<string[]> {
  const { d, host, app } = r;
  const out = await d.ssh.check(
    host,
    "list releases",
    `for r in ${q(`${r.appDir}/releases`)}/*/; do [ -d "$r" ] || continue; printf '%s %s\\n' "$(stat -c %Y "$r")" "$(basename "$r")"; done`,
  );
  const releases = out
    .split("\n")
    .map((l) => /^(\d+) ([a-z0-9_]+)$/.exec(l.trim()))
    .filter((m): m is RegExpExecArray => !!m)
    .map((m) => ({ installedAt: Number(m[1]), version: m[2]! }));
  const gone = releasesToPrune(releases, inUse, d.keep);
  if (gone.length) {
    await d.ssh.check(host, "prune releases", r.install(`prune ${app} ${gone.join(" ")}`));
    r.say(`pruned ${gone.join(", ")} (keeping ${d.keep})`);
  }
  return gone;
}
