// Debian packages unpacked into the project's own folder (`.data/tools/debian/<name>`), for the
// tools the deploy checks and tests need (shellcheck, cloud-init, openssh-server): fetched once with
// `apt-get download` from this machine's own Debian suite and a temporary source list, signatures
// checked with the machine's keyring, unpacked with `dpkg-deb -x`. Nothing on the system changes.
import { spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join, resolve } from "node:path";
import { MissingBinaryError, onPath } from "./binaries.ts";
import { DEBIAN_KEYRING, lastLine, tempApt } from "./debian-apt.ts";
import { debianMirror, withLock } from "./nats-binary.ts";

/** `.data/tools/debian` (DEBIAN_TOOLS_DIR overrides). */
export function debianToolsDir(): string {
  return process.env.DEBIAN_TOOLS_DIR ?? resolve(import.meta.dir, "..", "..", "..", ".data", "tools", "debian");
}

/** This machine's Debian suite (`bookworm`), from /etc/os-release. */
export function debianSuite(
  osRelease = existsSync("/etc/os-release") ? readFileSync("/etc/os-release", "utf8") : "",
): string | undefined {
  return /^VERSION_CODENAME=("?)([a-z]+)\1$/m.exec(osRelease)?.[2];
}

export interface UnpackedPackages {
  /** The folder the packages were unpacked into (it holds `usr/`, `etc/`, ...). */
  root: string;
  /** The .deb files unpacked. */
  packages: string[];
}

/**
 * The named Debian packages, unpacked together into `<debianToolsDir>/<name>` (fetched on first
 * use; a `manifest.json` records what is there). `name` names the set, e.g. `cloud-init`.
 */
export function debianPackages(name: string, pkgs: string[], log: (m: string) => void = () => {}): UnpackedPackages {
  const dir = join(debianToolsDir(), name);
  const hit = cachedPackages(dir, pkgs);
  if (hit) return hit;
  mkdirSync(dir, { recursive: true });
  return withLock(dir, () => cachedPackages(dir, pkgs) ?? fetchPackages(dir, pkgs, log));
}

/** What `dir` holds when its manifest lists exactly `pkgs`. */
function cachedPackages(dir: string, pkgs: string[]): UnpackedPackages | undefined {
  const manifest = join(dir, "manifest.json");
  if (!existsSync(manifest)) return undefined;
  try {
    const m = JSON.parse(readFileSync(manifest, "utf8")) as { wanted: string[]; packages: string[] };
    return m.wanted.join(" ") === pkgs.join(" ") ? { root: join(dir, "root"), packages: m.packages } : undefined;
  } catch {
    return undefined;
  }
}

/** Downloads `pkgs` from this machine's suite (and its updates) in a work folder, then installs them into `dir`. */
function fetchPackages(dir: string, pkgs: string[], log: (m: string) => void): UnpackedPackages {
  const mirror = debianMirror();
  const suite = debianSuite();
  if (!mirror || !suite || !existsSync(DEBIAN_KEYRING) || !onPath("apt-get") || !onPath("dpkg-deb")) {
    throw new MissingBinaryError(
      `cannot fetch ${pkgs.join(", ")}: this machine has no apt with a Debian archive (set DEBIAN_MIRROR)`,
    );
  }
  const work = mkdtempSync(join(dir, ".apt-"));
  try {
    const apt = tempApt(work, mirror, [suite, `${suite}-updates`]);
    log(`fetching ${pkgs.join(", ")} from Debian ${suite} (apt-get download, into ${dir})`);
    const upd = apt(["update"]);
    if (upd.status !== 0) throw new MissingBinaryError(`apt-get update for ${suite} failed: ${lastLine(upd)}`);
    const dl = apt(["download", ...pkgs]);
    const debs = readdirSync(work).filter((f) => f.endsWith(".deb"));
    if (dl.status !== 0 || debs.length !== pkgs.length) {
      throw new MissingBinaryError(`apt-get download ${pkgs.join(" ")} failed: ${lastLine(dl)}`);
    }
    installPackages(dir, unpackDebs(work, debs), { wanted: pkgs, packages: debs.sort(), suite });
    log(`unpacked ${debs.join(", ")}`);
    return { root: join(dir, "root"), packages: debs.sort() };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** Unpacks every .deb of `work` into `work/root`; returns that folder. */
function unpackDebs(work: string, debs: string[]): string {
  const root = join(work, "root");
  for (const deb of debs) {
    const x = spawnSync("dpkg-deb", ["-x", join(work, deb), root], { encoding: "utf8" });
    if (x.status !== 0) throw new MissingBinaryError(`dpkg-deb -x ${deb} failed: ${x.stderr.trim()}`);
  }
  return root;
}

/** Moves `root` to `dir/root` (replacing what was there) and writes `dir/manifest.json`. */
function installPackages(
  dir: string,
  root: string,
  what: { wanted: string[]; packages: string[]; suite: string },
): void {
  rmSync(join(dir, "root"), { recursive: true, force: true });
  renameSync(root, join(dir, "root"));
  writeFileSync(
    join(dir, "manifest.json"),
    `${JSON.stringify({ ...what, fetchedAt: new Date().toISOString() }, null, 2)}\n`,
  );
}

/** `shellcheck` from PATH, else Debian's package unpacked into the project. */
export function findShellcheck(log?: (m: string) => void): string {
  return (
    onPath("shellcheck") ?? join(debianPackages("shellcheck", ["shellcheck"], log).root, "usr", "bin", "shellcheck")
  );
}

/**
 * A command that runs Debian's `cloud-init` (its `schema` subcommand needs no system): the
 * package and the Python modules it imports, unpacked into the project, run with the system's python3.
 */
export function cloudInitCommand(log?: (m: string) => void): { cmd: string[]; env: Record<string, string> } {
  const sys = onPath("cloud-init");
  if (sys) return { cmd: [sys], env: {} };
  const { root } = debianPackages(
    "cloud-init",
    [
      "cloud-init",
      "python3-jinja2",
      "python3-markupsafe",
      "python3-jsonschema",
      "python3-attr",
      "python3-pyrsistent",
      "python3-configobj",
      "python3-jsonpatch",
      "python3-json-pointer",
      "python3-requests",
      "python3-urllib3",
      "python3-idna",
      "python3-certifi",
      "python3-chardet",
      "python3-charset-normalizer",
      "python3-netifaces",
      "python3-six",
    ],
    log,
  );
  const python = onPath("python3") && existsSync("/usr/bin/python3") ? "/usr/bin/python3" : onPath("python3")!;
  return {
    cmd: [python, join(root, "usr", "bin", "cloud-init")],
    env: { PYTHONPATH: join(root, "usr", "lib", "python3", "dist-packages") },
  };
}

/** Debian's `sshd` and its tools, unpacked into the project (for the deploy test's hosts). */
export function findSshd(log?: (m: string) => void): string {
  const root = debianPackages("openssh-server", ["openssh-server", "openssh-sftp-server"], log).root;
  return join(root, "usr", "sbin", "sshd");
}
