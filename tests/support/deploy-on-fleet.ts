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

export function deployOnFleetTests(log: (m: string) => void): void {
  describe("the deploy command against the fleet's real hosts", () => {
    let state: State;
    let s: Secrets;
    let dist: string;
    let otherKey: string;
    const printed: string[] = [];
    const apps = () => state.hosts.filter((h) => h.role === "app");
    const gw = (v: string) => join(dist, binaryName("gateway", v, "x64"));
    const releases = (h: HostState) =>
      inMachine(h, "ls /opt/captcha-pipeline/gateway/releases").stdout.trim().split("\n").sort();
    const current = (h: HostState) => inMachine(h, "readlink /opt/captcha-pipeline/gateway/current").stdout.trim();

    async function writeSha(path: string, key: string | undefined) {
      writeFileSync(`${path}.sha256`, `${await sha256File(path)}  ${path.split("/").pop()}\n`);
      if (key) signChecksum(`${path}.sha256`, key);
    }

    /** `npm run deploy -- gateway <version>` on the fleet's inventory (or `inventory`), its JSON report. */
    async function deploy(version: string, o: { batch?: number; inventory?: string } = {}) {
      const p = Bun.spawn(
        [process.execPath, join(REPO, "infra", "deploy", "deploy.ts"), "gateway", version]
          .concat(["--hosts", o.inventory ?? state.inventory!, "--dist", dist, "--ssh-key", s.sshKey])
          .concat(["--secrets", state.secretsStore!, "--health-timeout", "30000", "--json"])
          .concat(o.batch ? ["--batch", String(o.batch)] : []),
        { cwd: REPO, env: { ...process.env, RELEASE_SIGNING_KEY: "" }, stdout: "pipe", stderr: "pipe" },
      );
      const [stdout, stderr, code] = await Promise.all([
        new Response(p.stdout).text(),
        new Response(p.stderr).text(),
        p.exited,
      ]);
      printed.push(stdout, stderr);
      let report: Report | undefined;
      try {
        report = JSON.parse(stdout) as Report;
      } catch {}
      log(
        `deploy gateway ${version}: exit ${code}${report ? ` ${JSON.stringify(report.hosts.map((h) => [h.host, h.status]))}` : ""}`,
      );
      return { code, stderr, report };
    }

    async function secrets(...args: string[]) {
      const p = Bun.spawn(
        [
          process.execPath,
          join(REPO, "infra", "deploy", "deploy.ts"),
          "secrets",
          ...args,
          "--store",
          state.secretsStore!,
        ],
        { cwd: REPO, stdout: "pipe", stderr: "pipe" },
      );
      const [stdout, stderr, code] = await Promise.all([
        new Response(p.stdout).text(),
        new Response(p.stderr).text(),
        p.exited,
      ]);
      printed.push(stdout, stderr);
      return { code, stdout, stderr };
    }

    beforeAll(async () => {
      state = readState()!;
      s = ensureSecrets();
      dist = mkdtempSync(join(tmpdir(), "rehearsal-deploy-"));
      otherKey = join(dist, "other_ed25519");
      expect(spawnSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "other", "-f", otherKey]).status).toBe(0);
      const built = join(
        releaseOnce("gateway", "v2", "gapless", s.signingKey, log),
        binaryName("gateway", "v2", "x64"),
      );
      // v3, v4: the healthy binary under other versions, signed by the fleet's release key.
      for (const v of ["v3", "v4"]) {
        copyFileSync(built, gw(v));
        await writeSha(gw(v), s.signingKey);
      }
      // v6: a binary that no longer matches its .sha256; v7: unsigned; v8: signed by a key the
      // hosts do not trust; v9: another binary, its .sha256 rewritten to match it (the signature
      // is the real line's).
      copyFileSync(built, gw("v6"));
      writeFileSync(`${gw("v6")}.sha256`, `${"0".repeat(64)}  ${binaryName("gateway", "v6", "x64")}\n`);
      copyFileSync(built, gw("v7"));
      await writeSha(gw("v7"), undefined);
      copyFileSync(built, gw("v8"));
      await writeSha(gw("v8"), otherKey);
      copyFileSync(built, gw("v9"));
      await writeSha(gw("v9"), s.signingKey);
      writeFileSync(gw("v9"), "#!/bin/sh\nexit 3\n", { mode: 0o755 });
      writeFileSync(`${gw("v9")}.sha256`, `${await sha256File(gw("v9"))}  ${binaryName("gateway", "v9", "x64")}\n`);
    }, 300_000);

    afterAll(() => {
      if (dist) rmSync(dist, { recursive: true, force: true });
    });

    test("a binary that does not match its .sha256 is refused before any host is touched", async () => {
      const before = apps().map(current);
      const r = await deploy("v6");
      expect(r.code).toBe(1);
      expect(r.stderr).toContain("does not match its .sha256");
      for (const h of apps()) expect(releases(h)).not.toContain("v6");
      expect(apps().map(current)).toEqual(before);
    }, 120_000);

    test("only signed releases are installed: unsigned, signed by a key the hosts do not trust, a checksum rewritten: nothing installed", async () => {
      const before = apps().map(current);
      const first = apps()[0]!.name;
      const unsigned = await deploy("v7", { batch: 1 });
      expect(unsigned.code).toBe(1);
      expect(unsigned.report!.hosts[0]!.reason).toContain(
        "gateway-v7-linux-x64.sha256.sig is missing: an unsigned release is refused",
      );
      for (const v of ["v8", "v9"]) {
        const r = await deploy(v, { batch: 1 });
        expect(r.code).toBe(1);
        expect(r.report!.hosts[0]).toMatchObject({ host: first, status: "failed" });
        // The host's install script checked the signature itself, with its allowed_signers.
        expect(r.report!.hosts[0]!.reason).toContain(`signature refused for gateway-${v}-linux-x64, nothing installed`);
        expect(r.report!.skipped).toEqual(
          apps()
            .slice(1)
            .map((h) => h.name),
        );
      }
      for (const h of apps())
        for (const v of ["v7", "v8", "v9"])
          expect({ h: h.name, v, in: releases(h).includes(v) }).toEqual({ h: h.name, v, in: false });
      expect(apps().map(current)).toEqual(before);
      // Every gateway back in its LB's rotation (a refused release never took one out for good).
      const lb = state.hosts.find((h) => h.role === "lb" && h.region === apps()[0]!.region)!;
      await allGatewaysUp(
        lb.ip,
        apps()
          .filter((h) => h.region === lb.region)
          .map((h) => h.name),
      );
    }, 300_000);

    test("host keys are pinned: a key or fingerprint other than the inventory's is refused before anything is copied; no pin at all is refused by name", async () => {
      const inv = JSON.parse(readFileSync(state.inventory!, "utf8")) as {
        hosts: Array<{ name: string; hostKeys?: string[] }>;
      };
      const wrongKey = readFileSync(`${otherKey}.pub`, "utf8").trim().split(" ").slice(0, 2).join(" ");
      const wrongPrint = spawnSync("ssh-keygen", ["-l", "-E", "sha256", "-f", `${otherKey}.pub`], {
        encoding: "utf8",
      }).stdout.split(" ")[1]!;
      inv.hosts[0]!.hostKeys = [wrongKey];
      inv.hosts[1]!.hostKeys = [wrongPrint];
      const wrong = join(dist, "inventory-wrong-keys.json");
      writeFileSync(wrong, JSON.stringify(inv));
      const r = await deploy("v3", { batch: 2, inventory: wrong });
      expect(r.code).toBe(1);
      expect(r.report!.hosts.slice(0, 2).map((h) => [h.host, h.status])).toEqual([
        [inv.hosts[0]!.name, "failed"],
        [inv.hosts[1]!.name, "failed"],
      ]);
      expect(r.report!.hosts[0]!.reason).toContain("its host key is not the one pinned in the inventory's hostKeys");
      expect(r.report!.hosts[1]!.reason).toContain("matches none of the inventory's hostKeys");
      for (const h of apps()) expect(releases(h)).not.toContain("v3");
      delete inv.hosts[0]!.hostKeys;
      writeFileSync(wrong, JSON.stringify(inv));
      const unpinned = await deploy("v3", { inventory: wrong });
      expect(unpinned.code).toBe(1);
      expect(unpinned.stderr).toContain(
        `hosts.0.hostKeys: ${inv.hosts[0]!.name} is a deploy target and has no pinned host key`,
      );
    }, 120_000);

    test("an API key rotated reaches the gateways with the next deploy, the one before valid until retired; the last 3 releases kept; no secret printed", async () => {
      const old = state.apiKey!;
      const client = (apiKey: string): LbClient => ({ url: state.lbUrl!, ca: s.caPem, apiKey });
      const usage = async (key: string) => (await call(client(key), "/v1/usage")).status;
      const rotate = await secrets("rotate", "api-keys");
      expect(rotate.code).toBe(0);
      const fresh = readStore(state.secretsStore!).secrets["api-keys"]!.value;
      expect(fresh).not.toBe(old);
      expect(await usage(fresh)).toBe(401);
      const v3 = await deploy("v3");
      expect(v3.code).toBe(0);
      expect(v3.stderr).toContain("changed: API_KEYS");
      expect([await usage(fresh), await usage(old)]).toEqual([200, 200]);
      expect((await secrets("retire", "api-keys")).code).toBe(0);
      expect((await deploy("v4")).code).toBe(0);
      expect([await usage(fresh), await usage(old)]).toEqual([200, 401]);
      // The fleet's clients from now on: the fresh key (state.json is what the drills read).
      writeState({ ...readState()!, apiKey: fresh });
      for (const h of apps()) {
        expect(current(h)).toBe("releases/v4");
        const left = releases(h);
        expect(left).toHaveLength(3);
        expect(left).toContain("v4");
        expect(left).toContain("v3");
      }
      const values = storeValues(state.secretsStore!).concat(old);
      for (const [i, text] of printed.entries())
        for (const v of values) expect({ output: i, leaked: text.includes(v) }).toEqual({ output: i, leaked: false });
      log(
        `nothing printed leaked: ${values.length} values searched in ${printed.length} outputs of deploy and secrets`,
      );
    }, 400_000);
  });
}
