// The deploy command's refusals and its release housekeeping against the rehearsal's real hosts
// (tests/rehearsal.test.ts registers these in its fleet's describe): a checksum that does not
// match, unsigned or wrongly signed releases, host keys that are not the pinned ones, an API key
// rotated and retired through the secrets store, and the releases pruned to the last 3. Nothing
// here stands in for systemd, sshd or sudo: the hosts are the fleet's, built from cloud-init.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { binaryName, sha256File, signChecksum } from "../../infra/build.ts";
import { readStore } from "../../infra/deploy/cli/secret-store.ts";
import { call, type LbClient } from "../../infra/rehearsal/client.ts";
import { allGatewaysUp, releaseOnce } from "../../infra/rehearsal/gapless.ts";
import { inMachine } from "../../infra/rehearsal/machine.ts";
import { ensureSecrets, type Secrets } from "../../infra/rehearsal/secrets.ts";
import { type HostState, readState, type State, writeState } from "../../infra/rehearsal/state.ts";
import { storeValues } from "./fleet-host-checks.ts";

const REPO = join(import.meta.dir, "..", "..");

interface Report {
  ok: boolean;
  hosts: Array<{ host: string; status: string; reason?: string }>;
  skipped: string[];
}

interface Fleet {
  state: State;
  s: Secrets;
  dist: string;
  otherKey: string;
  /** Everything the deploy and secrets commands printed (searched for secrets at the end). */
  printed: string[];
  log: (m: string) => void;
}

const apps = (f: Fleet) => f.state.hosts.filter((h) => h.role === "app");
const gw = (f: Fleet, v: string) => join(f.dist, binaryName("gateway", v, "x64"));
const releases = (h: HostState) =>
  inMachine(h, "ls /opt/captcha-pipeline/gateway/releases").stdout.trim().split("\n").sort();
const current = (h: HostState) => inMachine(h, "readlink /opt/captcha-pipeline/gateway/current").stdout.trim();

async function writeSha(path: string, key: string | undefined) {
  writeFileSync(`${path}.sha256`, `${await sha256File(path)}  ${path.split("/").pop()}\n`);
  if (key) signChecksum(`${path}.sha256`, key);
}

async function spawnOut(argv: string[], f: Fleet, env?: Record<string, string>) {
  const p = Bun.spawn(argv, { cwd: REPO, env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([
    new Response(p.stdout).text(),
    new Response(p.stderr).text(),
    p.exited,
  ]);
  f.printed.push(stdout, stderr);
  return { code, stdout, stderr };
}

/** `npm run deploy -- gateway <version>` on the fleet's inventory (or `inventory`), its JSON report. */
async function deploy(f: Fleet, version: string, o: { batch?: number; inventory?: string } = {}) {
  const r = await spawnOut(
    [process.execPath, join(REPO, "infra", "deploy", "deploy.ts"), "gateway", version]
      .concat(["--hosts", o.inventory ?? f.state.inventory!, "--dist", f.dist, "--ssh-key", f.s.sshKey])
      .concat(["--secrets", f.state.secretsStore!, "--health-timeout", "30000", "--json"])
      .concat(o.batch ? ["--batch", String(o.batch)] : []),
    f,
    { RELEASE_SIGNING_KEY: "" },
  );
  let report: Report | undefined;
  try {
    report = JSON.parse(r.stdout) as Report;
  } catch {}
  f.log(
    `deploy gateway ${version}: exit ${r.code}${report ? ` ${JSON.stringify(report.hosts.map((h) => [h.host, h.status]))}` : ""}`,
  );
  return { code: r.code, stderr: r.stderr, report };
}

const secrets = (f: Fleet, ...args: string[]) =>
  spawnOut(
    [
      process.execPath,
      join(REPO, "infra", "deploy", "deploy.ts"),
      "secrets",
      ...args,
      "--store",
      f.state.secretsStore!,
    ],
    f,
  );

/**
 * The releases: v3, v4 the healthy gateway under other versions, signed by the fleet's release
 * key; v6 a binary that no longer matches its .sha256; v7 unsigned; v8 signed by a key the hosts
 * do not trust; v9 another binary, its .sha256 rewritten to match it (the signature is the real
 * line's).
 */
async function fleetFixture(log: (m: string) => void): Promise<Fleet> {
  const state = readState()!;
  const s = ensureSecrets();
  const dist = mkdtempSync(join(tmpdir(), "rehearsal-deploy-"));
  const f: Fleet = { state, s, dist, otherKey: join(dist, "other_ed25519"), printed: [], log };
  expect(spawnSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "other", "-f", f.otherKey]).status).toBe(0);
  const built = join(releaseOnce("gateway", "v2", "gapless", s.signingKey, log), binaryName("gateway", "v2", "x64"));
  for (const v of ["v3", "v4"]) {
    copyFileSync(built, gw(f, v));
    await writeSha(gw(f, v), s.signingKey);
  }
  copyFileSync(built, gw(f, "v6"));
  writeFileSync(`${gw(f, "v6")}.sha256`, `${"0".repeat(64)}  ${binaryName("gateway", "v6", "x64")}\n`);
  copyFileSync(built, gw(f, "v7"));
  await writeSha(gw(f, "v7"), undefined);
  copyFileSync(built, gw(f, "v8"));
  await writeSha(gw(f, "v8"), f.otherKey);
  copyFileSync(built, gw(f, "v9"));
  await writeSha(gw(f, "v9"), s.signingKey);
  writeFileSync(gw(f, "v9"), "#!/bin/sh\nexit 3\n", { mode: 0o755 });
  writeFileSync(`${gw(f, "v9")}.sha256`, `${await sha256File(gw(f, "v9"))}  ${binaryName("gateway", "v9", "x64")}\n`);
  return f;
}

async function checksumRefused(f: Fleet): Promise<void> {
  const before = apps(f).map(current);
  const r = await deploy(f, "v6");
  expect(r.code).toBe(1);
  expect(r.stderr).toContain("does not match its .sha256");
  for (const h of apps(f)) expect(releases(h)).not.toContain("v6");
  expect(apps(f).map(current)).toEqual(before);
}

async function unsignedRefused(f: Fleet): Promise<void> {
  const before = apps(f).map(current);
  const first = apps(f)[0]!.name;
  const unsigned = await deploy(f, "v7", { batch: 1 });
  expect(unsigned.code).toBe(1);
  expect(unsigned.report!.hosts[0]!.reason).toContain(
    "gateway-v7-linux-x64.sha256.sig is missing: an unsigned release is refused",
  );
  for (const v of ["v8", "v9"]) {
    const r = await deploy(f, v, { batch: 1 });
    expect(r.code).toBe(1);
    expect(r.report!.hosts[0]).toMatchObject({ host: first, status: "failed" });
    // The host's install script checked the signature itself, with its allowed_signers.
    expect(r.report!.hosts[0]!.reason).toContain(`signature refused for gateway-${v}-linux-x64, nothing installed`);
    expect(r.report!.skipped).toEqual(
      apps(f)
        .slice(1)
        .map((h) => h.name),
    );
  }
  for (const h of apps(f))
    for (const v of ["v7", "v8", "v9"])
      expect({ h: h.name, v, in: releases(h).includes(v) }).toEqual({ h: h.name, v, in: false });
  expect(apps(f).map(current)).toEqual(before);
  // Every gateway back in its LB's rotation (a refused release never took one out for good).
  const lb = f.state.hosts.find((h) => h.role === "lb" && h.region === apps(f)[0]!.region)!;
  await allGatewaysUp(
    lb.ip,
    apps(f)
      .filter((h) => h.region === lb.region)
      .map((h) => h.name),
  );
}

async function hostKeysPinned(f: Fleet): Promise<void> {
  const inv = JSON.parse(readFileSync(f.state.inventory!, "utf8")) as {
    hosts: Array<{ name: string; hostKeys?: string[] }>;
  };
  const wrongKey = readFileSync(`${f.otherKey}.pub`, "utf8").trim().split(" ").slice(0, 2).join(" ");
  const wrongPrint = spawnSync("ssh-keygen", ["-l", "-E", "sha256", "-f", `${f.otherKey}.pub`], {
    encoding: "utf8",
  }).stdout.split(" ")[1]!;
  inv.hosts[0]!.hostKeys = [wrongKey];
  inv.hosts[1]!.hostKeys = [wrongPrint];
  const wrong = join(f.dist, "inventory-wrong-keys.json");
  writeFileSync(wrong, JSON.stringify(inv));
  const r = await deploy(f, "v3", { batch: 2, inventory: wrong });
  expect(r.code).toBe(1);
  expect(r.report!.hosts.slice(0, 2).map((h) => [h.host, h.status])).toEqual([
    [inv.hosts[0]!.name, "failed"],
    [inv.hosts[1]!.name, "failed"],
  ]);
  expect(r.report!.hosts[0]!.reason).toContain("its host key is not the one pinned in the inventory's hostKeys");
  expect(r.report!.hosts[1]!.reason).toContain("matches none of the inventory's hostKeys");
  for (const h of apps(f)) expect(releases(h)).not.toContain("v3");
  delete inv.hosts[0]!.hostKeys;
  writeFileSync(wrong, JSON.stringify(inv));
  const unpinned = await deploy(f, "v3", { inventory: wrong });
  expect(unpinned.code).toBe(1);
  expect(unpinned.stderr).toContain(
    `hosts.0.hostKeys: ${inv.hosts[0]!.name} is a deploy target and has no pinned host key`,
  );
}

async function rotateAndPrune(f: Fleet): Promise<void> {
  const old = f.state.apiKey!;
  const client = (apiKey: string): LbClient => ({ url: f.state.lbUrl!, ca: f.s.caPem, apiKey });
  const usage = async (key: string) => (await call(client(key), "/v1/usage")).status;
  const rotate = await secrets(f, "rotate", "api-keys");
  expect(rotate.code).toBe(0);
  const fresh = readStore(f.state.secretsStore!).secrets["api-keys"]!.value;
  expect(fresh).not.toBe(old);
  expect(await usage(fresh)).toBe(401);
  const v3 = await deploy(f, "v3");
  expect(v3.code).toBe(0);
  expect(v3.stderr).toContain("changed: API_KEYS");
  expect([await usage(fresh), await usage(old)]).toEqual([200, 200]);
  expect((await secrets(f, "retire", "api-keys")).code).toBe(0);
  expect((await deploy(f, "v4")).code).toBe(0);
  expect([await usage(fresh), await usage(old)]).toEqual([200, 401]);
  // The fleet's clients from now on: the fresh key (f.state.json is what the drills read).
  writeState({ ...readState()!, apiKey: fresh });
  for (const h of apps(f)) {
    expect(current(h)).toBe("releases/v4");
    const left = releases(h);
    expect(left).toHaveLength(3);
    expect(left).toContain("v4");
    expect(left).toContain("v3");
  }
  const values = storeValues(f.state.secretsStore!).concat(old);
  for (const [i, text] of f.printed.entries())
    for (const v of values) expect({ output: i, leaked: text.includes(v) }).toEqual({ output: i, leaked: false });
  f.log(
    `nothing printed leaked: ${values.length} values searched in ${f.printed.length} outputs of deploy and secrets`,
  );
}

export function deployOnFleetTests(log: (m: string) => void): void {
  describe("the deploy command against the fleet's real hosts", () => {
    let f: Fleet;
    beforeAll(async () => {
      f = await fleetFixture(log);
    }, 300_000);
    afterAll(() => {
      if (f?.dist) rmSync(f.dist, { recursive: true, force: true });
    });
    test(
      "a binary that does not match its .sha256 is refused before any host is touched",
      () => checksumRefused(f),
      120_000,
    );
    test(
      "only signed releases are installed: unsigned, signed by a key the hosts do not trust, a checksum rewritten: nothing installed",
      () => unsignedRefused(f),
      300_000,
    );
    test(
      "host keys are pinned: a key or fingerprint other than the inventory's is refused before anything is copied; no pin at all is refused by name",
      () => hostKeysPinned(f),
      120_000,
    );
    test(
      "an API key rotated reaches the gateways with the next deploy, the one before valid until retired; the last 3 releases kept; no secret printed",
      () => rotateAndPrune(f),
      400_000,
    );
  });
}
