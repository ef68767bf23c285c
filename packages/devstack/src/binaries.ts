import { execFileSync, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { MissingBinaryError, onPath, postgresBinDir } from "@pipeline/shared/host-binaries";

// Finding on the host is @pipeline/shared/host-binaries' (production code uses it too); the dev
// tooling adds installing through apt when something is missing and we are root.
export { MissingBinaryError, onPath };

const isRoot = () => typeof process.getuid === "function" && process.getuid() === 0;

let aptUpdated = false;
/** Installs Debian packages when we are root and apt exists; returns false when it cannot. */
function aptInstall(pkgs: string[], log: (m: string) => void): boolean {
  if (!isRoot() || !onPath("apt-get")) return false;
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  if (!aptUpdated) {
    log(`apt-get update (to install ${pkgs.join(", ")})`);
    spawnSync("apt-get", ["-o", "DPkg::Lock::Timeout=300", "update", "-qq"], { stdio: "inherit", env });
    aptUpdated = true;
  }
  log(`apt-get install ${pkgs.join(" ")}`);
  // Another run (CI beside a helper) may hold the dpkg lock: wait for it rather than fail.
  const r = spawnSync(
    "apt-get",
    ["-o", "DPkg::Lock::Timeout=300", "install", "-y", "-qq", "--no-install-recommends", ...pkgs],
    { stdio: "inherit", env },
  );
  return r.status === 0;
}

export interface PostgresBinaries {
  initdb: string;
  pgCtl: string;
  pgDump: string;
  pgRestore: string;
  psql: string;
  version: number;
}

/** Postgres server binaries: PG_BIN_DIR, /usr/lib/postgresql/<newest>/bin, PATH, or apt's `postgresql`. */
export function findPostgres(log: (m: string) => void = () => {}): PostgresBinaries {
  let dir = postgresBinDir("initdb");
  if (!dir && aptInstall(["postgresql"], log)) dir = postgresBinDir("initdb");
  if (!dir)
    throw new MissingBinaryError("PostgreSQL server binaries not found; apt-get install postgresql, or set PG_BIN_DIR");
  const bin = (n: string) => join(dir!, n);
  const out = execFileSync(bin("initdb"), ["--version"], { encoding: "utf8" });
  const version = Number(/(\d+)/.exec(out)?.[1] ?? 0);
  return {
    initdb: bin("initdb"),
    pgCtl: bin("pg_ctl"),
    pgDump: bin("pg_dump"),
    pgRestore: bin("pg_restore"),
    psql: bin("psql"),
    version,
  };
}

/** Path of promtool (Prometheus' checker): PATH, or installed from Debian's `prometheus` package. */
export function findPromtool(log: (m: string) => void = () => {}): string {
  let p = onPath("promtool");
  if (!p && aptInstall(["prometheus"], log)) p = onPath("promtool");
  if (!p)
    throw new MissingBinaryError(
      "promtool not found; install Debian's prometheus package (apt-get install prometheus)",
    );
  return p;
}

/** Debian's chromium for the browser tests (driven by playwright-core): /usr/bin/chromium, else installed through apt (root). */
export function findChromium(log: (m: string) => void = () => {}): string {
  const bin = process.env.CHROMIUM_BIN ?? "/usr/bin/chromium";
  if (existsSync(bin)) return bin;
  if (aptInstall(["chromium"], log) && existsSync(bin)) return bin;
  throw new MissingBinaryError(
    `chromium not found at ${bin}; apt-get install --no-install-recommends chromium (as root), or set CHROMIUM_BIN`,
  );
}

/**
 * Debian's sudo and visudo, for the deploy tests (the deploy user's sudoers rule is enforced by the
 * real sudo): /usr/bin/sudo, else installed through apt (root). The package's /etc/sudoers grants
 * nothing beyond root's own rights; the tests' rules live in their network namespaces only.
 */
export function findSudo(log: (m: string) => void = () => {}): { sudo: string; visudo: string } {
  const found = () =>
    existsSync("/usr/bin/sudo") && existsSync("/usr/sbin/visudo")
      ? { sudo: "/usr/bin/sudo", visudo: "/usr/sbin/visudo" }
      : undefined;
  const bins = found() ?? (aptInstall(["sudo"], log) ? found() : undefined);
  if (!bins) throw new MissingBinaryError("sudo not found at /usr/bin/sudo; apt-get install sudo (as root)");
  return bins;
}
