// The host's tools the rehearsal needs: debootstrap and systemd-nspawn (Debian's systemd-container).
// Installed with apt-get when missing: both are Debian packages of the host's own release, apt is
// configured and reachable here, and nspawn needs its whole package (libraries, the .so it loads),
// which an unpacked copy (packages/devstack/src/debian-tools.ts) would have to chase by hand.
import { existsSync } from "node:fs";
import { check, type Log, run } from "./exec.ts";

const TOOLS: Array<{ bin: string; pkg: string }> = [
  { bin: "debootstrap", pkg: "debootstrap" },
  { bin: "systemd-nspawn", pkg: "systemd-container" },
  { bin: "nsenter", pkg: "util-linux" },
  { bin: "ssh", pkg: "openssh-client" },
  { bin: "openssl", pkg: "openssl" },
];

const onPath = (bin: string) => run(["sh", "-c", `command -v ${bin}`]).code === 0;

export function ensureHostTools(log: Log): void {
  if (process.getuid?.() !== 0)
    throw new Error("the rehearsal runs as root (it boots containers, makes a bridge and mounts overlays)");
  const missing = TOOLS.filter((t) => !onPath(t.bin)).map((t) => t.pkg);
  if (missing.length) {
    log(`installing ${missing.join(", ")} with apt-get`);
    const env = { DEBIAN_FRONTEND: "noninteractive" };
    if (run(["apt-get", "install", "-y", "--no-install-recommends", ...missing], { env }).code !== 0) {
      check(["apt-get", "update", "-qq"], { env });
      check(["apt-get", "install", "-y", "--no-install-recommends", ...missing], { env });
    }
  }
  for (const t of TOOLS) if (!onPath(t.bin)) throw new Error(`${t.bin} is still missing after installing ${t.pkg}`);
  if (
    !existsSync("/sys/fs/cgroup/systemd") &&
    !existsSync("/sys/fs/cgroup/unified") &&
    !existsSync("/sys/fs/cgroup/cgroup.controllers")
  )
    throw new Error("no cgroup hierarchy under /sys/fs/cgroup");
}
