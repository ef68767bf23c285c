// Hosts for the deploy command's test: each a network namespace joined to this machine by a veth
// pair, running Debian's openssh-server (unpacked into .data/tools by the project, nothing
// installed), reachable as root with a key made for the test. Each host has its own tree
// (`<dir>/<name>/{opt,etc,run,bin}`) and a stand-in for systemctl (host-systemctl.sh): systemd
// cannot run inside a namespace. The namespaces share this machine's file system otherwise.
import { spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findSshd } from "@pipeline/shared/localstack";
import { eventually } from "@pipeline/shared/testing";

export interface SshHost {
  name: string;
  ns: string;
  /** The host's address, inside its namespace. */
  ip: string;
  /** This machine's end of the link, which the host can reach. */
  peerIp: string;
  /** `<dir>/<name>`: opt/ (releases), etc/ (env files), run/ (pids, logs), bin/systemctl. */
  dir: string;
}

export interface SshHosts {
  hosts: SshHost[];
  key: string;
  knownHosts: string;
  /** An inventory file as Terraform's output would give it, with the test trees' paths. */
  inventory: string;
  /** Runs a shell command on a host (inside its namespace); async, so relays in this process keep working. */
  exec(host: SshHost, cmd: string): Promise<{ code: number; out: string }>;
  stop(): Promise<void>;
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

export async function startSshHosts(names: string[], region: string): Promise<SshHosts> {
  const sshd = findSshd();
  const sftp = join(sshd, "..", "..", "lib", "openssh", "sftp-server");
  const dir = mkdtempSync(join(tmpdir(), "pipeline-hosts-"));
  chmodSync(dir, 0o700);
  const key = join(dir, "id_ed25519");
  sh("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", key]);
  const hostKey = join(dir, "host_ed25519");
  sh("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", hostKey]);
  const authorized = join(dir, "authorized_keys");
  copyFileSync(`${key}.pub`, authorized);
  // sshd's privilege separation needs an `sshd` user and /run/sshd; `ip netns exec` bind-mounts
  // /etc/netns/<ns>/passwd over /etc/passwd for the namespace's processes, so the user exists only there.
  mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
  const passwd = `${readFileSync("/etc/passwd", "utf8").trimEnd()}\n${/^sshd:/m.test(readFileSync("/etc/passwd", "utf8")) ? "" : "sshd:x:64999:65534::/run/sshd:/usr/sbin/nologin\n"}`;
  const tag = `${(process.pid % 900) + 100}`;
  const octet = 100 + (process.pid % 120);
  const hosts: SshHost[] = [];
  const started: { ns: string; pidFile: string }[] = [];
  const stop = async () => {
    for (const h of hosts) {
      // Everything started on the host: the stand-in's services, then sshd.
      spawnSync("sh", ["-c", `for p in '${h.dir}'/run/*.pid; do [ -f "$p" ] && kill -KILL "$(cat "$p")" 2>/dev/null; done; true`]);
    }
    for (const s of started) if (existsSync(s.pidFile)) spawnSync("kill", ["-KILL", readFileSync(s.pidFile, "utf8").trim()]);
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
      hosts.push({ name, ns, ip, peerIp, dir: hostDir });
      sh("ip", ["link", "add", a, "type", "veth", "peer", "name", b]);
      sh("ip", ["link", "set", b, "netns", ns]);
      sh("ip", ["addr", "add", `${peerIp}/30`, "dev", a]);
      sh("ip", ["link", "set", a, "up"]);
      sh("ip", ["netns", "exec", ns, "ip", "addr", "add", `${ip}/30`, "dev", b]);
      sh("ip", ["netns", "exec", ns, "ip", "link", "set", b, "up"]);
      sh("ip", ["netns", "exec", ns, "ip", "link", "set", "lo", "up"]);
      mkdirSync(`/etc/netns/${ns}`, { recursive: true });
      writeFileSync(`/etc/netns/${ns}/passwd`, passwd);
      for (const d of ["opt", "etc", "run", "bin"]) mkdirSync(join(hostDir, d), { recursive: true });
      chmodSync(join(hostDir, "etc"), 0o700);
      copyFileSync(join(import.meta.dir, "host-systemctl.sh"), join(hostDir, "bin", "systemctl"));
      chmodSync(join(hostDir, "bin", "systemctl"), 0o755);
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
          "PermitRootLogin prohibit-password",
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
    writeFileSync(knownHosts, hosts.map((h) => `${h.ip} ${readFileSync(`${hostKey}.pub`, "utf8").trim()}`).join("\n") + "\n");
    const inventory = join(dir, "inventory.json");
    writeFileSync(
      inventory,
      JSON.stringify(
        {
          hosts: hosts.map((h) => ({
            name: h.name,
            region,
            roles: ["app"],
            ssh: { host: h.ip, user: "root", port: 22 },
            privateIp: h.ip,
            root: join(h.dir, "opt"),
            etc: join(h.dir, "etc"),
            systemctl: join(h.dir, "bin", "systemctl"),
          })),
        },
        null,
        2,
      ),
    );
    return {
      hosts,
      key,
      knownHosts,
      inventory,
      async exec(host, cmd) {
        const p = Bun.spawn(["ip", "netns", "exec", host.ns, "sh", "-c", cmd], { stdout: "pipe", stderr: "pipe" });
        const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
        return { code, out: `${out}${err}` };
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
