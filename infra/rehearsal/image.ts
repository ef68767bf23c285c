// The image: a Debian 12 root every rehearsal host boots from (read-only, below each machine's
// overlay). debootstrap makes the base (its downloads kept as a tarball: --make-tarball once,
// --unpack-tarball after), apt-get in a chroot adds what the project's cloud-init files install,
// so no host needs the network at boot. Kept in the machine-wide cache (REHEARSAL_CACHE) and linked
// from the clone's .data/rehearsal/image; rebuilt when missing or when its recipe changes; a lock
// directory keeps two processes from building it at once.
import { createHash } from "node:crypto";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { debianMirror } from "@pipeline/devstack";
import { CACHE, DATA, SUITE } from "./config.ts";
import { check, type Log, run, sleep } from "./exec.ts";

/** debootstrap's own set (the research's: systemd as PID 1, SSH, a network, curl). */
export const BASE_PACKAGES = [
  "systemd",
  "systemd-sysv",
  "dbus",
  "openssh-server",
  "iproute2",
  "ca-certificates",
  "curl",
  "procps",
  "libnss-systemd",
];
/**
 * Added with apt: cloud-init and what the project's user-data installs (`packages:` of
 * infra/deploy/cloud-init/*.yaml: nftables, curl, ca-certificates, postgresql-client, sudo,
 * apache2-utils, postgresql), the load balancer's HAProxy, locales (en_US.UTF-8, cloud-init's
 * default locale) and ping for diagnosis. imageRecipe() checks the cloud-init files' lists are covered.
 */
export const EXTRA_PACKAGES = [
  "cloud-init",
  "locales",
  "nftables",
  "sudo",
  "postgresql",
  "postgresql-client",
  "apache2-utils",
  "haproxy",
  "iputils-ping",
];
/** Bump when the build steps below change in a way the package lists do not show. */
const RECIPE_REV = 2;

export interface Image {
  key: string;
  /** The root directory (the overlays' lower layer). */
  root: string;
  /** Seconds the build took, or 0 when it came from the cache. */
  builtSeconds: number;
  cached: boolean;
  /** The units a role's package enables on install, disabled in the image: by package. */
  roleUnits: Record<string, string[]>;
}

/** The `packages:` list of a cloud-config text. */
export function packagesOf(text: string): string[] {
  const block = /^packages:\n((?:[ \t]+.*\n|\n)*)/m.exec(text)?.[1] ?? "";
  return [...block.matchAll(/^\s+-\s+([a-z0-9][a-z0-9.+-]*)\s*$/gm)].map((m) => m[1]!);
}

/** Every role's packages (infra/deploy/cloud-init/*.yaml), so the image cannot fall behind them. */
export function cloudInitPackages(repo: string): { all: string[]; everyRole: string[] } {
  const dir = join(repo, "infra", "deploy", "cloud-init");
  const lists = readdirSync(dir)
    .filter((f) => f.endsWith(".yaml"))
    .map((f) => packagesOf(readFileSync(join(dir, f), "utf8")));
  const all = [...new Set(lists.flat())].sort();
  return { all, everyRole: all.filter((p) => lists.every((l) => l.includes(p))) };
}

export function imageRecipe(repo: string): { key: string; base: string[]; extra: string[]; rolePackages: string[] } {
  const { all, everyRole } = cloudInitPackages(repo);
  const extra = [...new Set([...EXTRA_PACKAGES, ...all])].sort();
  // A role's own packages (not every role's, and not the image's base): their units stay disabled in
  // the image and are enabled per machine, where its user-data installs the package (as apt would).
  const rolePackages = extra.filter(
    (p) => !everyRole.includes(p) && !["cloud-init", "locales", "iputils-ping"].includes(p),
  );
  const key = createHash("sha256")
    .update(JSON.stringify({ SUITE, BASE_PACKAGES, extra, rolePackages, RECIPE_REV }))
    .digest("hex")
    .slice(0, 12);
  return { key, base: BASE_PACKAGES, extra, rolePackages };
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** A directory lock: mkdir wins; a lock whose holder died is taken over. */
async function withDirLock<T>(lock: string, log: Log, fn: () => Promise<T>): Promise<T> {
  let said = false;
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, "pid"), String(process.pid));
      break;
    } catch {
      const pid = Number(existsSync(join(lock, "pid")) ? readFileSync(join(lock, "pid"), "utf8") : "0");
      if (pid && !alive(pid)) {
        log(`taking over ${lock} (its holder ${pid} is gone)`);
        rmSync(lock, { recursive: true, force: true });
        continue;
      }
      if (!said) log(`waiting for ${lock} (process ${pid || "?"} builds the image)`);
      said = true;
      await sleep(2000);
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** Links .data/rehearsal/image to the cached image, so the clone names it too. */
function linkIntoClone(dir: string): void {
  const link = join(DATA, "image");
  mkdirSync(DATA, { recursive: true });
  try {
    if (lstatSync(link).isSymbolicLink() && readlinkSync(link) === dir) return;
    rmSync(link, { recursive: true, force: true });
  } catch {}
  symlinkSync(dir, link);
}

export async function ensureImage(repo: string, log: Log, cache = CACHE): Promise<Image> {
  const recipe = imageRecipe(repo);
  const dir = join(cache, "images", recipe.key);
  const manifest = join(dir, "image.json");
  const done = (): Image | undefined => {
    if (!existsSync(manifest) || !existsSync(join(dir, "root", "sbin", "init"))) return undefined;
    linkIntoClone(dir);
    const m = JSON.parse(readFileSync(manifest, "utf8")) as { roleUnits?: Record<string, string[]> };
    return { key: recipe.key, root: join(dir, "root"), builtSeconds: 0, cached: true, roleUnits: m.roleUnits ?? {} };
  };
  const hit = done();
  if (hit) return hit;
  mkdirSync(dirname(dir), { recursive: true });
  return withDirLock(`${dir}.lock`, log, async () => {
    const again = done();
    if (again) return again;
    const t0 = Date.now();
    const roleUnits = build(recipe, dir, cache, log);
    const seconds = Math.round((Date.now() - t0) / 100) / 10;
    writeFileSync(
      manifest,
      `${JSON.stringify({ key: recipe.key, suite: SUITE, base: recipe.base, extra: recipe.extra, roleUnits, builtAt: new Date().toISOString(), seconds }, null, 2)}\n`,
    );
    linkIntoClone(dir);
    log(`image ${recipe.key} built in ${seconds} s`);
    pruneImages(cache, recipe.key, log);
    return { key: recipe.key, root: join(dir, "root"), builtSeconds: seconds, cached: false, roleUnits };
  });
}

/** Removes the images of older recipes that no machine's overlay uses (a running rehearsal keeps its own). */
function pruneImages(cache: string, keep: string, log: Log): void {
  const images = join(cache, "images");
  const mounts = readFileSync("/proc/self/mountinfo", "utf8");
  for (const key of readdirSync(images)) {
    if (key === keep || key.endsWith(".lock") || mounts.includes(join(images, key))) continue;
    if (existsSync(join(images, `${key}.lock`))) continue;
    rmSync(join(images, key), { recursive: true, force: true });
    log(`removed the image of an older recipe (${key})`);
  }
}

function build(recipe: ReturnType<typeof imageRecipe>, dir: string, cache: string, log: Log): Record<string, string[]> {
  const mirror = debianMirror();
  if (!mirror) throw new Error("no Debian mirror in apt's sources (set DEBIAN_MIRROR)");
  const include = `--include=${recipe.base.join(",")}`;
  const tarball = join(
    cache,
    `debootstrap-${SUITE}-${createHash("sha256").update(include).digest("hex").slice(0, 12)}.tgz`,
  );
  if (!existsSync(tarball)) {
    log(`debootstrap: downloading ${SUITE} (minbase + ${recipe.base.join(" ")}) from ${mirror} into ${tarball}`);
    const work = `${tarball}.work`;
    rmSync(work, { recursive: true, force: true });
    check(["debootstrap", `--make-tarball=${tarball}.tmp`, "--variant=minbase", include, SUITE, work, mirror], {
      timeoutMs: 1_800_000,
    });
    rmSync(work, { recursive: true, force: true });
    renameSync(`${tarball}.tmp`, tarball);
  }
  const tmp = join(dir, "root.tmp");
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  log(`debootstrap: unpacking ${tarball} into ${tmp}`);
  check(["debootstrap", `--unpack-tarball=${tarball}`, "--variant=minbase", include, SUITE, tmp, mirror], {
    timeoutMs: 1_800_000,
  });
  let roleUnits: Record<string, string[]> = {};
  inChroot(tmp, (chroot) => {
    installExtras(tmp, mirror, recipe.extra, chroot, log);
    roleUnits = disableRoleUnits(recipe.rolePackages, chroot);
  });
  renameSync(tmp, join(dir, "root"));
  return roleUnits;
}

/** Disables the units each role package enabled on install; returns them by package. */
function disableRoleUnits(packages: string[], chroot: Chroot): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const pkg of packages) {
    const units = chroot(
      `dpkg -L ${pkg} | grep -E '^/(usr/)?lib/systemd/system/[^/@]+\\.(service|timer|socket)$' | xargs -r -n1 basename | sort -u | while read -r u; do [ "$(systemctl is-enabled "$u" 2>/dev/null)" = enabled ] && echo "$u"; done; true`,
    )
      .split("\n")
      .filter(Boolean);
    if (units.length) {
      chroot(`systemctl disable ${units.join(" ")} >/dev/null 2>&1`);
      out[pkg] = units;
    }
  }
  return out;
}

type Chroot = (script: string) => string;

/** Runs `fn` with a chroot into `root` that has /proc, /sys and /dev mounted (unmounted after). */
function inChroot(root: string, fn: (chroot: Chroot) => void): void {
  const mounts = [
    ["-t", "proc", "proc", join(root, "proc")],
    ["-t", "sysfs", "sysfs", join(root, "sys")],
    ["--bind", "/dev", join(root, "dev")],
    ["--bind", "/dev/pts", join(root, "dev", "pts")],
  ];
  const mounted: string[] = [];
  try {
    for (const m of mounts) {
      check(["mount", ...m]);
      mounted.unshift(m.at(-1)!);
    }
    fn((script) =>
      check(["chroot", root, "/bin/sh", "-ec", script], {
        env: { DEBIAN_FRONTEND: "noninteractive", LC_ALL: "C" },
        timeoutMs: 1_800_000,
      }),
    );
  } finally {
    for (const m of mounted) run(["umount", "-l", m]);
  }
}

/** apt-get in the chroot (the host's network): the extra packages, the locale, then the image made offline. */
function installExtras(tmp: string, mirror: string, extra: string[], chroot: Chroot, log: Log): void {
  writeFileSync(join(tmp, "etc", "resolv.conf"), readFileSync("/etc/resolv.conf", "utf8"));
  // No service starts inside the chroot while packages install.
  writeFileSync(join(tmp, "usr", "sbin", "policy-rc.d"), "#!/bin/sh\nexit 101\n", { mode: 0o755 });
  const security = mirror.replace(/\/debian$/, "/debian-security");
  writeFileSync(
    join(tmp, "etc", "apt", "sources.list"),
    `deb ${mirror} ${SUITE} main\ndeb ${mirror} ${SUITE}-updates main\ndeb ${security} ${SUITE}-security main\n`,
  );
  log(`apt-get install ${extra.join(" ")} (in the image)`);
  chroot("apt-get update -qq");
  chroot(`apt-get install -y -qq --no-install-recommends ${extra.join(" ")} >/dev/null`);
  chroot("apt-get dist-upgrade -y -qq >/dev/null");
  // cloud-init's default locale.
  chroot(
    "sed -i 's/^# *en_US.UTF-8 UTF-8/en_US.UTF-8 UTF-8/' /etc/locale.gen && locale-gen >/dev/null && update-locale LANG=en_US.UTF-8",
  );
  // The NoCloud seed is the only datasource (the rehearsal's stand-in for Hetzner's metadata).
  writeFileSync(
    join(tmp, "etc", "cloud", "cloud.cfg.d", "90-rehearsal.cfg"),
    "# The rehearsal's hosts read user-data from a NoCloud seed (/var/lib/cloud/seed/nocloud).\ndatasource_list: [ NoCloud, None ]\n",
  );
  // The network comes from systemd-networkd (a file per machine).
  chroot("systemctl enable systemd-networkd.service >/dev/null 2>&1");
  // Offline hosts: no apt source (cloud-init's package_update then has nothing to fetch, and its
  // `packages:` are installed already), no package lists, no downloaded .debs.
  chroot("apt-get clean && rm -rf /var/lib/apt/lists/*");
  writeFileSync(
    join(tmp, "etc", "apt", "sources.list"),
    "# The rehearsal's hosts have no route to a Debian mirror: every package is in the image (infra/rehearsal/image.ts).\n",
  );
  // Per machine at its start: machine-id, SSH host keys, hostname.
  writeFileSync(join(tmp, "etc", "machine-id"), "");
  chroot("rm -f /etc/ssh/ssh_host_* /etc/hostname /usr/sbin/policy-rc.d /etc/resolv.conf");
}
