// Finds a nats-server of at least MIN_NATS_SERVER, or fetches Debian's newest package into the
// project's own folder (nothing on the system changes). See docs/nats.md for why 2.14; the version
// rules (MIN_NATS_SERVER, versionAtLeast) live in @pipeline/shared/nats, which `recovery assess` reads too.

import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
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
import { MIN_NATS_SERVER, parseServerVersion, versionAtLeast } from "@pipeline/shared/nats";
import { MissingBinaryError, onPath } from "./binaries.ts";
import { DEBIAN_KEYRING, lastLine, tempApt } from "./debian-apt.ts";

/** The repository's `.data/bin`: where a fetched server is kept (NATS_BIN_DIR overrides). */
export function natsBinDir(): string {
  return process.env.NATS_BIN_DIR ?? resolve(import.meta.dir, "..", "..", "..", ".data", "bin");
}

/** The version a nats-server binary reports (`2.15.1`), or undefined when it does not run. */
export function natsServerVersion(bin: string): string | undefined {
  const r = spawnSync(bin, ["--version"], { encoding: "utf8" });
  const v = parseServerVersion(`${r.stdout ?? ""}${r.stderr ?? ""}`);
  return r.status === 0 && v ? v.join(".") : undefined;
}

export interface FetchedServer {
  bin: string;
  version: string;
  sha256: string;
  /** The .deb it came from and the suite that served it. */
  package: string;
  suite: string;
  fetchedAt: string;
}

const sha256 = (file: string) => createHash("sha256").update(readFileSync(file)).digest("hex");

/**
 * The Debian archive this machine already uses (its own apt sources name it), so the project
 * names no mirror of its own; DEBIAN_MIRROR overrides.
 */
export function debianMirror(sources = readAptSources()): string | undefined {
  if (process.env.DEBIAN_MIRROR) return process.env.DEBIAN_MIRROR;
  for (const m of sources.matchAll(/(?:^URIs:\s*|^deb\s+(?:\[[^\]]*\]\s+)?)(\S+)/gm)) {
    const uri = m[1]!.replace(/\/+$/, "");
    if (/\/debian$/.test(uri)) return uri;
  }
  return undefined;
}

function readAptSources(): string {
  const files = ["/etc/apt/sources.list"];
  const dir = "/etc/apt/sources.list.d";
  if (existsSync(dir)) for (const f of readdirSync(dir)) files.push(join(dir, f));
  return files
    .filter((f) => existsSync(f))
    .map((f) => readFileSync(f, "utf8"))
    .join("\n");
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** One fetch at a time per folder (test files start servers in parallel): a directory as the lock. */
export function withLock<T>(dir: string, fn: () => T): T {
  const lock = join(dir, ".fetch.lock");
  const until = Date.now() + 5 * 60_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (Date.now() > until) rmSync(lock, { recursive: true, force: true });
      sleepSync(200);
    }
  }
  try {
    return fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** The server already fetched into `dir`, when its recorded checksum still matches. */
export function cachedServer(dir = natsBinDir()): FetchedServer | undefined {
  const manifest = join(dir, "nats-server.json");
  if (!existsSync(manifest)) return undefined;
  try {
    const m = JSON.parse(readFileSync(manifest, "utf8")) as FetchedServer;
    const bin = join(dir, "nats-server");
    if (!existsSync(bin) || sha256(bin) !== m.sha256 || !versionAtLeast(m.version, MIN_NATS_SERVER)) return undefined;
    return { ...m, bin };
  } catch {
    return undefined;
  }
}

/**
 * Downloads the newest `nats-server` package of Debian's development suites with apt-get and a
 * temporary source list (signatures checked with the machine's Debian keyring), unpacks the
 * binary into `dir` and records its version and sha256 in `dir/nats-server.json`.
 */
export function fetchDebianServer(log: (m: string) => void, dir = natsBinDir()): FetchedServer {
  mkdirSync(dir, { recursive: true });
  return withLock(dir, () => cachedServer(dir) ?? fetchIntoDir(log, dir));
}

/** Tries Debian unstable, then testing, in a work folder inside `dir` that is removed after. */
function fetchIntoDir(log: (m: string) => void, dir: string): FetchedServer {
  const mirror = debianMirror();
  if (!mirror || !existsSync(DEBIAN_KEYRING) || !onPath("apt-get") || !onPath("dpkg-deb")) {
    throw new MissingBinaryError(
      "cannot fetch nats-server: this machine has no apt with a Debian archive (set DEBIAN_MIRROR, or NATS_SERVER_BIN)",
    );
  }
  const work = mkdtempSync(join(dir, ".apt-"));
  try {
    for (const suite of ["unstable", "testing"]) {
      const fetched = fetchFromSuite(log, dir, join(work, suite), mirror, suite);
      if (fetched) return fetched;
    }
    throw new MissingBinaryError(
      `no nats-server >= ${MIN_NATS_SERVER} could be fetched from Debian (unstable, testing); set NATS_SERVER_BIN to one`,
    );
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** `suite`'s nats-server, downloaded and unpacked in `work`, installed into `dir` when new enough; else undefined (logged). */
function fetchFromSuite(
  log: (m: string) => void,
  dir: string,
  work: string,
  mirror: string,
  suite: string,
): FetchedServer | undefined {
  const apt = tempApt(work, mirror, [suite]);
  log(`fetching nats-server from Debian ${suite} (apt-get download, into ${dir})`);
  const upd = apt(["update"]);
  if (upd.status !== 0) {
    log(`apt-get update for ${suite} failed: ${lastLine(upd)}`);
    return undefined;
  }
  const dl = apt(["download", "nats-server"]);
  const deb = readdirSync(work).find((f) => /^nats-server_.*\.deb$/.test(f));
  if (dl.status !== 0 || !deb) {
    log(`apt-get download nats-server from ${suite} failed: ${lastLine(dl)}`);
    return undefined;
  }
  const x = join(work, "x");
  const unpack = spawnSync("dpkg-deb", ["-x", join(work, deb), x], { encoding: "utf8" });
  const found = ["usr/sbin/nats-server", "usr/bin/nats-server"].map((p) => join(x, p)).find((p) => existsSync(p));
  if (unpack.status !== 0 || !found) return undefined;
  const version = natsServerVersion(found);
  if (!version || !versionAtLeast(version, MIN_NATS_SERVER)) {
    log(`Debian ${suite} has nats-server ${version ?? "?"}, older than ${MIN_NATS_SERVER}`);
    return undefined;
  }
  return installServer(log, dir, found, { version, package: deb, suite });
}

/** Copies `binary` into `dir/nats-server` (atomically) and records it in `dir/nats-server.json`. */
function installServer(
  log: (m: string) => void,
  dir: string,
  binary: string,
  from: { version: string; package: string; suite: string },
): FetchedServer {
  const tmp = join(dir, `.nats-server.${process.pid}`);
  copyFileSync(binary, tmp);
  chmodSync(tmp, 0o755);
  renameSync(tmp, join(dir, "nats-server"));
  const fetched: FetchedServer = {
    bin: join(dir, "nats-server"),
    version: from.version,
    sha256: sha256(join(dir, "nats-server")),
    package: from.package,
    suite: from.suite,
    fetchedAt: new Date().toISOString(),
  };
  writeFileSync(join(dir, "nats-server.json"), `${JSON.stringify(fetched, null, 2)}\n`);
  log(`nats-server ${from.version} from ${from.package} (sha256 ${fetched.sha256.slice(0, 16)}…)`);
  return fetched;
}

export interface FoundServer {
  bin: string;
  version: string;
  /** Where it came from: NATS_SERVER_BIN, PATH, or the project's fetched copy. */
  source: "NATS_SERVER_BIN" | "PATH" | "fetched";
}

const found = new Map<string, FoundServer>();

/**
 * A nats-server of at least MIN_NATS_SERVER: NATS_SERVER_BIN when set (refused when older); else
 * one on PATH when it is new enough; else Debian's newest package, fetched into `.data/bin/` once.
 * Throws a MissingBinaryError that says what to do when none can be had.
 */
export function findNatsServer(log: (m: string) => void = () => {}): FoundServer {
  const key = `${process.env.NATS_SERVER_BIN ?? ""}|${natsBinDir()}`;
  const hit = found.get(key);
  if (hit) return hit;
  const result = locate(log);
  found.set(key, result);
  return result;
}

function locate(log: (m: string) => void): FoundServer {
  const fromEnv = process.env.NATS_SERVER_BIN;
  if (fromEnv) {
    if (!existsSync(fromEnv)) throw new MissingBinaryError(`NATS_SERVER_BIN=${fromEnv} does not exist`);
    const version = natsServerVersion(fromEnv);
    if (!version || !versionAtLeast(version, MIN_NATS_SERVER)) {
      throw new MissingBinaryError(
        `NATS_SERVER_BIN=${fromEnv} is nats-server ${version ?? "(does not run)"}; the project needs >= ${MIN_NATS_SERVER}`,
      );
    }
    return { bin: fromEnv, version, source: "NATS_SERVER_BIN" };
  }
  const onPathBin = onPath("nats-server");
  if (onPathBin) {
    const version = natsServerVersion(onPathBin);
    if (version && versionAtLeast(version, MIN_NATS_SERVER)) return { bin: onPathBin, version, source: "PATH" };
    log(`${onPathBin} is nats-server ${version ?? "?"}, older than ${MIN_NATS_SERVER}: using the project's own copy`);
  }
  const cached = cachedServer() ?? fetchDebianServer(log);
  return { bin: cached.bin, version: cached.version, source: "fetched" };
}
