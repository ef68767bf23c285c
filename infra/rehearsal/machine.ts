// One host of the rehearsal: a systemd-nspawn container booting systemd as PID 1 from the cached
// image through an overlayfs of its own, with its hostname, a fresh machine-id, its own SSH host
// key, a systemd-networkd file giving host0 its static address, and a NoCloud seed holding the
// host's user-data. This machine's PID 1 is not systemd, so (../shared/research/real-systemd.md)
// nspawn runs with --keep-unit --register=no from a cgroup made for it, and sees a cgroup2-only
// tree (SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1).
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { BRIDGE, DATA, type HostSpec, machineName, PREFIX } from "./config.ts";
import { check, type Log, run, runAsync, sleep, waitFor } from "./exec.ts";
import { type HostState, type State, writeState } from "./state.ts";

export interface MachineSeed {
  userData: string;
  /** The host's SSH host key pair (private, public), written before boot; cloud-init keeps it. */
  hostKey: { private: string; public: string };
  /** Units of the packages its user-data installs, disabled in the image: enabled as apt would have. */
  enableUnits: string[];
  /** Units enabled in the image whose package this host does not install. */
  disableUnits: string[];
}

export interface RunningMachine {
  name: string;
  machine: string;
  /** systemd-nspawn's pid on the host. */
  nspawnPid: number;
  /** The container's PID 1 (systemd) as the host sees it: nsenter's target. */
  leaderPid: number;
  dir: string;
  /** When nspawn was started (boot times count from here). */
  startedAt: number;
}

const CGROUP_ROOTS = ["/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"].filter((d) => existsSync(d));

export const machineDir = (h: HostSpec) => join(DATA, "machines", h.name);

const mounted = (path: string) =>
  readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .some((l) => l.split(" ")[4] === path);

/** Layers and files: upper/work/merged, the overlay mounted, the per-host files written into it. */
function prepare(h: HostSpec, imageRoot: string, seed: MachineSeed): string {
  const dir = machineDir(h);
  const merged = join(dir, "root");
  if (mounted(merged)) run(["umount", merged]);
  rmSync(dir, { recursive: true, force: true });
  for (const d of ["upper", "work", "root"]) mkdirSync(join(dir, d), { recursive: true });
  check([
    "mount",
    "-t",
    "overlay",
    "overlay",
    "-o",
    `lowerdir=${imageRoot},upperdir=${join(dir, "upper")},workdir=${join(dir, "work")}`,
    merged,
  ]);
  const put = (path: string, text: string, mode = 0o644) => {
    const p = join(merged, path);
    mkdirSync(join(p, ".."), { recursive: true });
    writeFileSync(p, text, { mode });
  };
  put("etc/hostname", `${h.name}\n`);
  put("etc/machine-id", `${randomBytes(16).toString("hex")}\n`, 0o444);
  put("etc/ssh/ssh_host_ed25519_key", seed.hostKey.private, 0o600);
  put("etc/ssh/ssh_host_ed25519_key.pub", seed.hostKey.public);
  // The image's side of cloud-init (what a cloud image ships in /etc/cloud): keep the host key
  // written above (the inventory pins it), and no network step (networkd has the address).
  put(
    "etc/cloud/cloud.cfg.d/91-rehearsal-host.cfg",
    "# infra/rehearsal/machine.ts: the host key is made before boot (and pinned); networkd has the address.\nssh_deletekeys: false\nssh_genkeytypes: []\nnetwork: {config: disabled}\n",
  );
  put(
    "etc/systemd/network/10-host0.network",
    `[Match]\nName=host0\n\n[Network]\nAddress=${h.ip}/${PREFIX}\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n`,
  );
  put(
    "var/lib/cloud/seed/nocloud/meta-data",
    `instance-id: ${h.name}-${randomBytes(4).toString("hex")}\nlocal-hostname: ${h.name}\n`,
  );
  put("var/lib/cloud/seed/nocloud/user-data", seed.userData);
  if (seed.enableUnits.length) check(["systemctl", "--quiet", `--root=${merged}`, "enable", ...seed.enableUnits]);
  if (seed.disableUnits.length) check(["systemctl", "--quiet", `--root=${merged}`, "disable", ...seed.disableUnits]);
  return merged;
}

function cgroupDirs(machine: string): string[] {
  return CGROUP_ROOTS.map((r) => join(r, machine));
}

export async function startMachine(
  h: HostSpec,
  imageRoot: string,
  seed: MachineSeed,
  log: Log,
): Promise<RunningMachine> {
  return launch(h, prepare(h, imageRoot, seed), "w", log);
}

/**
 * Pulls the plug: SIGKILL to nspawn and to everything in the machine's cgroups, nothing shut down
 * cleanly. Its disk (the overlay) stays as it was, for `powerOn`.
 */
export function powerOff(h: HostSpec, nspawnPid: number): void {
  try {
    process.kill(nspawnPid, "SIGKILL");
  } catch {}
  removeCgroups(machineName(h));
}

/** Boots a machine again from its disk as `powerOff` left it (no new seed: cloud-init's instance is the same). */
export async function powerOn(h: HostSpec, log: Log): Promise<RunningMachine> {
  const merged = join(machineDir(h), "root");
  if (!mounted(merged))
    throw new Error(`${h.name}: its disk is not mounted (${merged}): was it stopped with \`down\`?`);
  return launch(h, merged, "a", log);
}

async function launch(h: HostSpec, merged: string, consoleMode: "w" | "a", log: Log): Promise<RunningMachine> {
  const machine = machineName(h);
  const dir = machineDir(h);
  const startedAt = Date.now();
  removeCgroups(machine);
  for (const c of cgroupDirs(machine)) mkdirSync(c, { recursive: true });
  const out = openSync(join(dir, "console.log"), consoleMode);
  const moveSelf = cgroupDirs(machine)
    .map((c) => `echo $$ > ${c}/cgroup.procs`)
    .join("; ");
  const argv = [
    "systemd-nspawn",
    "--quiet",
    "--boot",
    "--keep-unit",
    "--register=no",
    `--machine=${machine}`,
    `--directory=${merged}`,
    `--network-bridge=${BRIDGE}`,
    "--system-call-filter=bpf",
    "--link-journal=no",
    "--resolv-conf=off",
    "--timezone=off",
    "--console=read-only",
  ];
  const child = spawn("/bin/sh", ["-c", `${moveSelf}; exec "$@"`, "sh", ...argv], {
    detached: true,
    stdio: ["ignore", out, out],
    env: { ...process.env, SYSTEMD_NSPAWN_UNIFIED_HIERARCHY: "1", SYSTEMD_LOG_LEVEL: "warning" },
  });
  child.unref();
  closeSync(out);
  const nspawnPid = child.pid!;
  const leaderPid = await waitFor(
    `${h.name}: systemd-nspawn's PID 1`,
    // Generous: the other hosts' prepare() (overlay, systemctl --root) runs synchronously meanwhile.
    90_000,
    () => {
      if (!existsSync(`/proc/${nspawnPid}`))
        throw new Error(
          `${h.name}: systemd-nspawn exited at start:\n${readFileSync(join(dir, "console.log"), "utf8").slice(-2000)}`,
        );
      const kids = readFileSync(`/proc/${nspawnPid}/task/${nspawnPid}/children`, "utf8")
        .trim()
        .split(/\s+/)
        .filter(Boolean)
        .map(Number);
      for (const k of kids) {
        try {
          if (readFileSync(`/proc/${k}/comm`, "utf8").trim() === "systemd") return k;
        } catch {}
      }
      return undefined;
    },
    100,
  );
  log(`${h.name}: booting (nspawn ${nspawnPid}, init ${leaderPid}, ${h.ip})`);
  return { name: h.name, machine, nspawnPid, leaderPid, dir, startedAt };
}

/** A command inside the machine, as root, in all its namespaces (nsenter on its PID 1). */
export function inMachine(
  m: Pick<RunningMachine, "leaderPid">,
  script: string,
  o: { input?: string; timeoutMs?: number } = {},
) {
  return run(nsenter(m, script), { ...o, env: inEnv });
}

const nsenter = (m: Pick<RunningMachine, "leaderPid">, script: string) => [
  "nsenter",
  "-t",
  String(m.leaderPid),
  "-m",
  "-u",
  "-i",
  "-n",
  "-p",
  "-C",
  "--",
  "/bin/sh",
  "-c",
  script,
];
const inEnv = { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", LANG: "C.UTF-8" };

/** inMachine, without blocking the event loop. */
export function inMachineAsync(
  m: Pick<RunningMachine, "leaderPid">,
  script: string,
  o: { input?: string; timeoutMs?: number } = {},
) {
  return runAsync(nsenter(m, script), { ...o, env: inEnv });
}

/**
 * Waits for systemd (`is-system-running`: running, or degraded with its failed units printed) and
 * for cloud-init (`status --wait`: done); throws with the failed units or cloud-init's errors.
 */
export async function waitBooted(
  m: RunningMachine,
  log: Log,
  timeoutMs = 240_000,
): Promise<{ systemdMs: number; cloudInitMs: number; state: string }> {
  const t0 = m.startedAt;
  const state = await waitFor(`${m.name}: systemctl is-system-running`, timeoutMs, async () => {
    if (!existsSync(`/proc/${m.nspawnPid}`))
      throw new Error(
        `${m.name}: systemd-nspawn exited while booting:\n${readFileSync(join(m.dir, "console.log"), "utf8").slice(-3000)}`,
      );
    const s = (await inMachineAsync(m, "systemctl is-system-running")).stdout.trim();
    return s === "running" || s === "degraded" ? s : undefined;
  });
  const systemdMs = Date.now() - t0;
  if (state === "degraded")
    log(`${m.name}: degraded; failed units:\n${inMachine(m, "systemctl --failed --no-legend --plain").stdout.trim()}`);
  const ci = await waitFor(`${m.name}: cloud-init status --wait`, timeoutMs, async () => {
    const r = await inMachineAsync(m, "cloud-init status --wait --long", { timeoutMs });
    return r.stdout.includes("status:") ? r : undefined;
  });
  const cloudInitMs = Date.now() - t0;
  if (!/^status: done/m.test(ci.stdout)) {
    const detail = inMachine(
      m,
      "grep -E 'WARNING|ERROR|Traceback|failed' /var/log/cloud-init.log | tail -20; tail -30 /var/log/cloud-init-output.log",
    ).stdout;
    throw new Error(`${m.name}: cloud-init did not finish cleanly (exit ${ci.code}):\n${ci.stdout.trim()}\n${detail}`);
  }
  return { systemdMs, cloudInitMs, state };
}

/** Every pid left in the machine's cgroups, deepest first. */
function cgroupPids(dir: string): number[] {
  if (!existsSync(dir)) return [];
  const pids: number[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true }))
    if (e.isDirectory()) pids.push(...cgroupPids(join(dir, e.name)));
  try {
    pids.push(...readFileSync(join(dir, "cgroup.procs"), "utf8").trim().split(/\s+/).filter(Boolean).map(Number));
  } catch {}
  return pids;
}

function rmdirTree(dir: string): void {
  if (!existsSync(dir)) return;
  for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) rmdirTree(join(dir, e.name));
  try {
    rmdirSync(dir);
  } catch {}
}

/**
 * Kills what is left in the machine's cgroups and removes them. A SIGKILL takes effect a moment
 * later (a process in the kernel finishes its call first) and a cgroup with a process cannot be
 * removed: the pids are killed again until none is left (up to 5 s), then the tree is removed.
 */
function removeCgroups(machine: string): void {
  for (const c of cgroupDirs(machine)) {
    for (let i = 0; i < 50; i++) {
      const pids = cgroupPids(c);
      if (pids.length === 0) break;
      for (const pid of pids) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {}
      }
      Bun.sleepSync(100);
    }
    rmdirTree(c);
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return !readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.startsWith("Z");
  } catch {
    return false;
  }
};

/**
 * Stops a machine: SIGTERM to nspawn (a clean poweroff inside), up to `graceMs`; then SIGKILL to
 * whatever is left in its cgroups; the cgroups removed; the overlay unmounted. Idempotent.
 */
export async function stopMachine(
  h: HostSpec,
  nspawnPid: number | undefined,
  log: Log,
  graceMs = 30_000,
): Promise<{ clean: boolean }> {
  const machine = machineName(h);
  let clean = true;
  if (nspawnPid && alive(nspawnPid) && readFileSync(`/proc/${nspawnPid}/cmdline`, "utf8").includes(machine)) {
    process.kill(nspawnPid, "SIGTERM");
    const until = Date.now() + graceMs;
    while (alive(nspawnPid) && Date.now() < until) await sleep(200);
    if (alive(nspawnPid)) {
      clean = false;
      log(`${h.name}: no poweroff within ${graceMs} ms: killing it`);
      process.kill(nspawnPid, "SIGKILL");
    }
  }
  removeCgroups(machine);
  const merged = join(machineDir(h), "root");
  for (let i = 0; i < 20 && mounted(merged); i++) {
    if (run(["umount", merged]).code !== 0) await sleep(250);
  }
  if (mounted(merged)) run(["umount", "-l", merged]);
  return { clean };
}

/** A host a drill powered off, booted again from its disk; the state records its new pids. */
export async function powerOnAgain(h: HostState, state: State, log: Log): Promise<void> {
  const m = await powerOn(h, log);
  Object.assign(h, { nspawnPid: m.nspawnPid, leaderPid: m.leaderPid });
  writeState(state);
  await waitBooted(m, log);
}
