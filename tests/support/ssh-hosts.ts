// Hosts for the deploy command's test: each a network namespace joined to this machine by a veth
// pair, running Debian's openssh-server (unpacked into .data/tools by the project, nothing
// installed). As on an app host bootstrapped by cloud-init, root cannot log in over SSH; the
// deploy logs in as `deploy`, whose sudo (Debian's sudo, the real rule of
// infra/deploy/sudoers/captcha-pipeline-deploy) allows only the app units' systemctl verbs and the
// install script (infra/deploy/scripts/captcha-pipeline-install.sh, which installs only releases
// signed by a key of the host's allowed_signers). Each host has its own tree
// (`<dir>/<name>/{opt,etc,run,bin,sbin,release}`) and a stand-in for systemctl (host-systemctl.sh):
// systemd cannot run inside a namespace. The rule and the script name the host's own paths
// instead of the production ones; nothing else in them changes. `ip netns exec` puts the host's
// passwd (with `deploy` and sshd's user) and sudoers over /etc's for the namespace's processes
// only; otherwise the namespaces share this machine's file system.
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findSshd, findSudo } from "@pipeline/devstack";
import { eventually } from "@pipeline/devstack/testing";
import { allowedSignersLine } from "../../infra/build.ts";

const DEPLOY = join(import.meta.dir, "..", "..", "infra", "deploy");
/** The production paths the sudoers rule and the install script name, as cloud-init installs them. */
const PROD = { systemctl: "/usr/bin/systemctl", install: "/usr/local/sbin/captcha-pipeline-install" };

export interface SshHost {
  name: string;
  ns: string;
  /** The host's address, inside its namespace. */
  ip: string;
  /** This machine's end of the link, which the host can reach. */
  peerIp: string;
  /** `<dir>/<name>`: opt/ (releases), etc/ (env files), run/ (pids, logs), bin/systemctl, sbin/captcha-pipeline-install, release/allowed_signers. */
  dir: string;
  /** The stand-in systemctl and the install script, as the host's sudoers rule names them. */
  systemctl: string;
  install: string;
}

export interface SshHosts {
  hosts: SshHost[];
  /** The deploy user's SSH key. */
  key: string;
  /** A known_hosts file with the hosts' key (for the test's own `ssh`; the deploy builds its own from the inventory). */
  knownHosts: string;
  /** The hosts' SSH host key (public, `ssh-ed25519 AAAA...`): every host has the same one. */
  hostKey: string;
  /**
   * An inventory file as Terraform's output would give it, with the test trees' paths: user
   * `deploy`, the first host's key pinned as a key, the others' as its fingerprint.
   */
  inventory: string;
  /** Runs a shell command on a host (inside its namespace, as root); async, so relays in this process keep working. */
  exec(host: SshHost, cmd: string): Promise<{ code: number; out: string }>;
  /** Runs a shell command on a host over SSH as the deploy user; `input` is a local file fed to its stdin. */
  sshAsDeploy(host: SshHost, cmd: string, input?: string): Promise<{ code: number; out: string; err: string }>;
  stop(): Promise<void>;
}

/**
 * The drop-in of infra/deploy/sudoers with the host's paths, under the Defaults of Debian's
 * /etc/sudoers, and sudo's own log of every command it ran (or refused) into `sudoLog`.
 */
function sudoersFor(systemctl: string, install: string, sudoLog: string): string {
  const rule = readFileSync(join(DEPLOY, "sudoers", "captcha-pipeline-deploy"), "utf8");
  if (!rule.includes(PROD.systemctl) || !rule.includes(PROD.install))
    throw new Error("the sudoers drop-in no longer names systemctl and the install script as expected");
  const header = [
    "Defaults\tenv_reset",
    'Defaults\tsecure_path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"',
    `Defaults\tlogfile="${sudoLog}"`,
    "root\tALL=(ALL:ALL) ALL",
    "",
  ].join("\n");
  return header + rule.replaceAll(PROD.systemctl, systemctl).replaceAll(PROD.install, install);
}

/** The install script with the host's tree in its three path lines; everything else as cloud-init installs it. */
function installScriptFor(hostDir: string): string {
  const script = readFileSync(join(DEPLOY, "scripts", "captcha-pipeline-install.sh"), "utf8");
  const paths: [RegExp, string][] = [
    [/^ROOT=\/opt\/captcha-pipeline$/m, `ROOT=${join(hostDir, "opt")}`],
    [/^ETC=\/etc\/captcha-pipeline$/m, `ETC=${join(hostDir, "etc")}`],
    [
      /^SIGNERS=\/etc\/captcha-pipeline-release\/allowed_signers$/m,
      `SIGNERS=${join(hostDir, "release", "allowed_signers")}`,
    ],
  ];
  return paths.reduce((text, [line, value]) => {
    if (!line.test(text)) throw new Error(`captcha-pipeline-install.sh: no line ${line}`);
    return text.replace(line, value);
  }, script);
}

/** What the hosts saw: every command line given to the deploy user's shell over SSH, and sudo's log. */
export interface Recorded {
  /** One entry per SSH command (the whole script the deploy sent), as the host's shell received it. */
  commandsLog: string;
  /** sudo's log: every command run as root, with its arguments. */
  sudoLog: string;
}

/** The deploy user's login shell: records its arguments (the command line sshd hands it), then is /bin/sh. */
function recordingShell(dir: string, uid: number): Recorded & { shell: string } {
  const commandsLog = join(dir, "commands.log");
  const sudoLog = join(dir, "sudo.log");
  writeFileSync(commandsLog, "", { mode: 0o600 });
  chownSync(commandsLog, uid, uid);
  const shell = join(dir, "deploy-shell");
  writeFileSync(
    shell,
    `#!/bin/sh\n# The test's record of each command line this host's sshd ran for the deploy user.\nprintf '%s\\n--\\n' "$*" >> '${commandsLog}'\nexec /bin/sh "$@"\n`,
    { mode: 0o755 },
  );
  return { commandsLog, sudoLog, shell };
}

/** A host's tree as cloud-init leaves an app host: folders, the stand-in systemctl, the install script, the units, allowed_signers. */
function hostTree(hostDir: string, systemctl: string, install: string, releaseSigners: string[]): void {
  for (const d of ["opt", "etc", "run", "bin", "sbin", "release", "units"])
    mkdirSync(join(hostDir, d), { recursive: true, mode: 0o755 });
  chmodSync(hostDir, 0o755);
  chmodSync(join(hostDir, "etc"), 0o700);
  for (const app of ["gateway", "solver", "recovery", "rollout"])
    mkdirSync(join(hostDir, "opt", app, "releases"), { recursive: true, mode: 0o755 });
  copyFileSync(join(import.meta.dir, "host-systemctl.sh"), systemctl);
  chmodSync(systemctl, 0o755);
  writeFileSync(install, installScriptFor(hostDir), { mode: 0o755 });
  // The real units: the stand-in reads their LoadCredential= lines.
  for (const unit of readdirSync(join(DEPLOY, "systemd")))
    copyFileSync(join(DEPLOY, "systemd", unit), join(hostDir, "units", unit));
  writeFileSync(
    join(hostDir, "release", "allowed_signers"),
    releaseSigners.map((k) => `${allowedSignersLine(k)}\n`).join(""),
    { mode: 0o644 },
  );
}

function sh(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")}: ${r.stderr || r.stdout}`);
  return r.stdout;
}

function reachable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host, port });
    s.once("connect", () => (s.destroy(), resolve(true)));
    s.once("error", () => resolve(false));
  });
}

/**
 * Starts the hosts. `releaseSigners`: the public keys whose release signatures the hosts accept
 * (their allowed_signers, as cloud-init writes it from Terraform's release_signing_keys).
 */
export async function startSshHosts(
  names: string[],
  region: string,
  o: { releaseSigners: string[] },
): Promise<SshHosts & Recorded> {
  const sshd = findSshd();
  findSudo();
  const sftp = join(sshd, "..", "..", "lib", "openssh", "sftp-server");
  const dir = mkdtempSync(join(tmpdir(), "pipeline-hosts-"));
  // The deploy user must reach the hosts' trees (as it reaches /opt/captcha-pipeline); the keys in here are 0600.
  chmodSync(dir, 0o711);
  const key = join(dir, "id_ed25519");
  sh("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", key]);
  const hostKey = join(dir, "host_ed25519");
  sh("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", hostKey]);
  const hostPub = readFileSync(`${hostKey}.pub`, "utf8").trim().split(" ").slice(0, 2).join(" ");
  const hostFingerprint = sh("ssh-keygen", ["-l", "-E", "sha256", "-f", `${hostKey}.pub`]).split(" ")[1]!;
  const authorized = join(dir, "authorized_keys");
  copyFileSync(`${key}.pub`, authorized);
  chmodSync(authorized, 0o644);
  // sshd's privilege separation needs an `sshd` user and /run/sshd; `ip netns exec` bind-mounts
  // /etc/netns/<ns>/passwd over /etc/passwd for the namespace's processes, so the users exist only
  // there: sshd's and `deploy` (no password: `*`, so that neither sshd nor PAM looks for a shadow entry).
  mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
  const systemPasswd = readFileSync("/etc/passwd", "utf8");
  const taken = new Set(systemPasswd.split("\n").map((l) => l.split(":")[2]));
  const deployUid = [64998, 64997, 64996, 64995].find((u) => !taken.has(String(u)))!;
  const deployHome = join(dir, "deploy-home");
  mkdirSync(deployHome, { mode: 0o700 });
  chownSync(deployHome, deployUid, deployUid);
  const recorded = recordingShell(dir, deployUid);
  const passwd = [
    systemPasswd.trimEnd(),
    ...(/^sshd:/m.test(systemPasswd) ? [] : ["sshd:x:64999:65534::/run/sshd:/usr/sbin/nologin"]),
    `deploy:*:${deployUid}:${deployUid}:captcha-pipeline deploy:${deployHome}:${recorded.shell}`,
    "",
  ].join("\n");
  const tag = `${(process.pid % 900) + 100}`;
  const octet = 100 + (process.pid % 120);
  const hosts: SshHost[] = [];
  const started: { ns: string; pidFile: string }[] = [];
  const stop = async () => {
    for (const h of hosts) {
      // Everything started on the host: the stand-in's services, then sshd.
      spawnSync("sh", [
        "-c",
        `for p in '${h.dir}'/run/*.pid; do [ -f "$p" ] && kill -KILL "$(cat "$p")" 2>/dev/null; done; true`,
      ]);
    }
    for (const s of started)
      if (existsSync(s.pidFile)) spawnSync("kill", ["-KILL", readFileSync(s.pidFile, "utf8").trim()]);
    for (const h of hosts) {
      spawnSync("ip", ["netns", "pids", h.ns], { encoding: "utf8" })
        .stdout?.split("\n")
        .filter(Boolean)
        .forEach((pid) => spawnSync("kill", ["-KILL", pid]));
      spawnSync("ip", ["netns", "del", h.ns]);
      rmSync(`/etc/netns/${h.ns}`, { recursive: true, force: true });
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (const [i, name] of names.entries()) {
      const ns = `pl${tag}h${i}`;
      const [a, b] = [`pl${tag}h${i}a`, `pl${tag}h${i}b`];
      const ip = `10.${octet}.${i}.2`;
      const peerIp = `10.${octet}.${i}.1`;
      spawnSync("ip", ["netns", "del", ns]);
      sh("ip", ["netns", "add", ns]);
      const hostDir = join(dir, name);
      const systemctl = join(hostDir, "bin", "systemctl");
      const install = join(hostDir, "sbin", "captcha-pipeline-install");
      hosts.push({ name, ns, ip, peerIp, dir: hostDir, systemctl, install });
      sh("ip", ["link", "add", a, "type", "veth", "peer", "name", b]);
      sh("ip", ["link", "set", b, "netns", ns]);
      sh("ip", ["addr", "add", `${peerIp}/30`, "dev", a]);
      sh("ip", ["link", "set", a, "up"]);
      sh("ip", ["netns", "exec", ns, "ip", "addr", "add", `${ip}/30`, "dev", b]);
      sh("ip", ["netns", "exec", ns, "ip", "link", "set", b, "up"]);
      sh("ip", ["netns", "exec", ns, "ip", "link", "set", "lo", "up"]);
      mkdirSync(`/etc/netns/${ns}`, { recursive: true });
      writeFileSync(`/etc/netns/${ns}/passwd`, passwd);
      writeFileSync(`/etc/netns/${ns}/sudoers`, sudoersFor(systemctl, install, recorded.sudoLog), { mode: 0o440 });
      hostTree(hostDir, systemctl, install, o.releaseSigners);
      const pidFile = join(dir, `sshd-${name}.pid`);
      const config = join(dir, `sshd-${name}.conf`);
      writeFileSync(
        config,
        [
          "Port 22",
          `ListenAddress ${ip}`,
          `HostKey ${hostKey}`,
          `PidFile ${pidFile}`,
          `AuthorizedKeysFile ${authorized}`,
          // As the app hosts' cloud-init sets it (sshd_config.d/10-captcha-pipeline.conf).
          "PermitRootLogin no",
          "PasswordAuthentication no",
          "KbdInteractiveAuthentication no",
          "UsePAM no",
          // The test's files live under /tmp (world-writable), which StrictModes refuses.
          "StrictModes no",
          "LogLevel ERROR",
          `Subsystem sftp ${sftp}`,
          "",
        ].join("\n"),
      );
      sh("ip", ["netns", "exec", ns, sshd, "-f", config, "-E", join(dir, `sshd-${name}.log`)]);
      started.push({ ns, pidFile });
    }
    for (const h of hosts) await eventually(() => reachable(h.ip, 22), 10_000, 100);
    const knownHosts = join(dir, "known_hosts");
    writeFileSync(knownHosts, hosts.map((h) => `${h.ip} ${hostPub}`).join("\n") + "\n");
    const inventory = join(dir, "inventory.json");
    writeFileSync(
      inventory,
      JSON.stringify(
        {
          hosts: hosts.map((h, i) => ({
            name: h.name,
            region,
            roles: ["app"],
            ssh: { host: h.ip, user: "deploy", port: 22 },
            hostKeys: [i === 0 ? hostPub : hostFingerprint],
            privateIp: h.ip,
            root: join(h.dir, "opt"),
            systemctl: h.systemctl,
            install: h.install,
          })),
        },
        null,
        2,
      ),
    );
    return {
      commandsLog: recorded.commandsLog,
      sudoLog: recorded.sudoLog,
      hosts,
      key,
      knownHosts,
      hostKey: hostPub,
      inventory,
      async exec(host, cmd) {
        const p = Bun.spawn(["ip", "netns", "exec", host.ns, "sh", "-c", cmd], { stdout: "pipe", stderr: "pipe" });
        const [out, err, code] = await Promise.all([
          new Response(p.stdout).text(),
          new Response(p.stderr).text(),
          p.exited,
        ]);
        return { code, out: `${out}${err}` };
      },
      async sshAsDeploy(host, cmd, input) {
        const opts = [
          "-F",
          "none",
          "-o",
          "BatchMode=yes",
          "-o",
          "StrictHostKeyChecking=yes",
          "-o",
          `UserKnownHostsFile=${knownHosts}`,
          "-o",
          "LogLevel=ERROR",
          "-i",
          key,
          "-o",
          "IdentitiesOnly=yes",
        ];
        const p = Bun.spawn(["ssh", ...opts, `deploy@${host.ip}`, cmd], {
          stdin: input ? Bun.file(input) : "ignore",
          stdout: "pipe",
          stderr: "pipe",
        });
        const [out, err, code] = await Promise.all([
          new Response(p.stdout).text(),
          new Response(p.stderr).text(),
          p.exited,
        ]);
        return { code, out, err };
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
