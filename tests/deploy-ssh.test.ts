// The deploy command (`npm run deploy`, issue 18) against real SSH: two hosts, each a network
// namespace running Debian's sshd, receive the compiled gateway over SSH, switch `current`, restart
// it (a stand-in for systemctl: systemd cannot run inside a namespace) and wait for /readyz; a
// release that does not come up is rolled back on its host and stops the deploy before the next batch.
// The deploy logs in as `deploy` (root cannot log in), whose sudo allows only the app units'
// systemctl verbs and the host's install script; it trusts only the host keys the inventory pins,
// and the hosts install only releases whose checksum is signed by a key of their allowed_signers.
// The apps' secrets come from the operator's secrets store (`npm run deploy -- secrets`): the deploy
// writes them over SSH's stdin as 0600 root files, the units hand them over as credentials, and no
// secret is on any command line the hosts saw, in sudo's log, in an app's log or in what the
// deploy printed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { natsEnv } from "@pipeline/devstack";
import { type Relay, startRelay } from "@pipeline/devstack/stack";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@pipeline/devstack/testing";
import { createEmulator, type Emulator } from "@pipeline/emulator";
import { binaryName, buildBinary, sha256File, signChecksum } from "../infra/build.ts";
import { appCredentials } from "../infra/deploy/cli/secret-catalog.ts";
import { readStore } from "../infra/deploy/cli/secret-store.ts";
import { type Recorded, type SshHosts, startSshHosts } from "./support/ssh-hosts.ts";

const REGION = "dep";
const API_KEY = "deploy-client-key-0001-0123456789abcdef"; // 32+ characters: a production gateway
let hosts: SshHosts & Recorded;
/** The operator's secrets store (outside the repository), and everything the deploy and the secrets command printed. */
let store: string;
const printed: string[] = [];
let nats: TestNats;
let tdb: TestDatabase;
let dist: string;
const relays: Relay[] = [];
let emu: Emulator;
const PROVIDER_KEY = "deploy-provider-key-0001";

/** The release signing key (`npm run build --signing-key`), and a key the hosts do not trust. */
let releaseKey: string;
let otherKey: string;

/** Writes `<path>.sha256` and, given a key, signs it as `npm run build` does. */
async function writeSha(path: string, key: string | undefined = releaseKey) {
  writeFileSync(`${path}.sha256`, `${await sha256File(path)}  ${path.split("/").pop()}\n`);
  if (key) signChecksum(`${path}.sha256`, key);
}

const gw = (v: string) => join(dist, binaryName("gateway", v, "x64"));

beforeAll(async () => {
  dist = mkdtempSync(join(tmpdir(), "pipeline-dist-"));
  [releaseKey, otherKey] = ["release", "other"].map((name) => {
    const key = join(dist, `${name}_ed25519`);
    expect(spawnSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", name, "-f", key]).status).toBe(0);
    return key;
  }) as [string, string];
  const [v1, s1] = await Promise.all([
    buildBinary({ app: "gateway", arch: "x64", version: "v1", outDir: dist, signingKey: releaseKey }),
    buildBinary({ app: "solver", arch: "x64", version: "v1", outDir: dist, signingKey: releaseKey }),
  ]);
  copyFileSync(s1.path, join(dist, binaryName("solver", "v3", "x64")));
  await writeSha(join(dist, binaryName("solver", "v3", "x64")));
  emu = createEmulator({ port: 0, keys: { [PROVIDER_KEY]: { threads: 100 } }, latencyMs: 10 });
  await emu.start();
  // v3..v5: the same healthy binary under other versions; v2: a release that crashes at start.
  for (const v of ["v3", "v4", "v5"]) {
    copyFileSync(v1.path, join(dist, binaryName("gateway", v, "x64")));
    await writeSha(join(dist, binaryName("gateway", v, "x64")));
  }
  const broken = join(dist, binaryName("gateway", "v2", "x64"));
  writeFileSync(broken, "#!/bin/sh\necho 'gateway v2: cannot start (a bad release)' >&2\nexit 3\n");
  chmodSync(broken, 0o755);
  await writeSha(broken);
  // v6: a binary that no longer matches its checksum file.
  copyFileSync(v1.path, join(dist, binaryName("gateway", "v6", "x64")));
  writeFileSync(
    join(dist, `${binaryName("gateway", "v6", "x64")}.sha256`),
    `${"0".repeat(64)}  ${binaryName("gateway", "v6", "x64")}\n`,
  );
  // v7: not signed; v8: signed by a key the hosts do not trust; v9: a binary other than the signed
  // one, with its .sha256 rewritten to match it (the signature is v9's real checksum line's).
  copyFileSync(v1.path, gw("v7"));
  await writeSha(gw("v7"), "");
  copyFileSync(v1.path, gw("v8"));
  await writeSha(gw("v8"), otherKey);
  copyFileSync(v1.path, gw("v9"));
  await writeSha(gw("v9"));
  copyFileSync(broken, gw("v9"));
  writeFileSync(`${gw("v9")}.sha256`, `${await sha256File(gw("v9"))}  ${binaryName("gateway", "v9", "x64")}\n`);

  [hosts, nats, tdb] = await Promise.all([
    startSshHosts(["dep-app-1", "dep-app-2"], REGION, { releaseSigners: [readFileSync(`${releaseKey}.pub`, "utf8")] }),
    startTestNats({ regions: [REGION], provision: true }),
    createTestDatabase("deploy"),
  ]);
  const pg = new URL(tdb.url);
  // The store: generated, then the test servers' own passwords and the client's key imported
  // (`secrets set`, on stdin), as an operator moving an existing fleet would. The pepper, the webhook
  // secret and the rest stay the generated ones.
  store = join(dist, "operator-config", "secrets.json");
  expect((await secrets("init", "--regions", REGION)).code).toBe(0);
  const imported: [string, string][] = [
    ["dep/nats/gateway", natsEnv(nats, "gateway").NATS_PASSWORD!],
    ["dep/nats/solver", natsEnv(nats, "solver").NATS_PASSWORD!],
    ["dep/postgres/pipeline_gateway", decodeURIComponent(pg.password)],
    ["dep/postgres/pipeline_solver", decodeURIComponent(pg.password)],
    ["api-keys", API_KEY],
  ];
  for (const [name, value] of imported) expect((await secrets("set", name, { stdin: value })).code).toBe(0);
  for (const h of hosts.hosts) {
    // The host reaches this machine's NATS and Postgres through relays on its end of the link.
    const [n, p, e] = await Promise.all([
      startRelay({ host: "127.0.0.1", port: nats.port }, { listenHost: h.peerIp }),
      startRelay({ host: "127.0.0.1", port: Number(pg.port) }, { listenHost: h.peerIp }),
      startRelay({ host: "127.0.0.1", port: Number(new URL(emu.url).port) }, { listenHost: h.peerIp }),
    ]);
    relays.push(n, p, e);
    const solverAuth = natsEnv(nats, "solver");
    // No secret in the env files: the passwords, keys and pepper are credentials (the emulator's key aside).
    writeFileSync(
      join(h.dir, "etc", "solver.env"),
      `PROVIDER_URL=http://${h.peerIp}:${e.port}\nPROVIDER_KEY=${PROVIDER_KEY}\nFIRST_POLL_MS=50\nPOLL_INTERVAL_MS=100\nNATS_USER=${solverAuth.NATS_USER}\n`,
      { mode: 0o600 },
    );
    const auth = natsEnv(nats, "gateway");
    const dbUrl = new URL(tdb.url);
    dbUrl.hostname = h.peerIp;
    dbUrl.port = String(p.port);
    dbUrl.password = "";
    writeFileSync(
      join(h.dir, "etc", "common.env"),
      `NATS_URL=nats://${h.peerIp}:${n.port}\nDATABASE_URL=${dbUrl}\nREGION=${REGION}\nLOG_LEVEL=info\n`,
      { mode: 0o600 },
    );
    writeFileSync(join(h.dir, "etc", "gateway.env"), `GATEWAY_PORT=8080\nNATS_USER=${auth.NATS_USER}\n`, {
      mode: 0o600,
    });
  }
}, 120_000);

afterAll(async () => {
  await hosts?.stop();
  await Promise.all(relays.map((r) => r.stop()));
  await Promise.all([nats?.dispose(), tdb?.drop(), emu?.stop()]);
  if (dist) rmSync(dist, { recursive: true, force: true });
});

/** `npm run deploy -- secrets ...` on the test's store; what it prints is kept for the leak check. */
async function secrets(...args: (string | { stdin: string })[]) {
  const opts = args.find((a): a is { stdin: string } => typeof a !== "string");
  const argv = args.filter((a): a is string => typeof a === "string");
  const p = Bun.spawn(
    [
      process.execPath,
      join(import.meta.dir, "..", "infra", "deploy", "deploy.ts"),
      "secrets",
      ...argv,
      "--store",
      store,
    ],
    { stdin: opts ? Buffer.from(opts.stdin) : "ignore", stdout: "pipe", stderr: "pipe" },
  );
  const [stdout, stderr, code] = await Promise.all([
    new Response(p.stdout).text(),
    new Response(p.stderr).text(),
    p.exited,
  ]);
  printed.push(stdout, stderr);
  return { code, stdout, stderr };
}

/** Runs the deploy command (async: the relays the hosts use live in this process). */
async function deploy(app: string, version: string, ...extra: string[]) {
  const inventory = extra.includes("--hosts") ? [] : ["--hosts", hosts.inventory];
  const p = Bun.spawn(
    [
      process.execPath,
      join(import.meta.dir, "..", "infra", "deploy", "deploy.ts"),
      app,
      version,
      ...inventory,
      "--dist",
      dist,
      "--ssh-key",
      hosts.key,
      "--health-timeout",
      "15000",
      "--secrets",
      store,
      "--json",
      ...extra,
    ],
    { env: { ...process.env, RELEASE_SIGNING_KEY: "" }, stdout: "pipe", stderr: "pipe" },
  );
  const [stdout, stderr, code] = await Promise.all([
    new Response(p.stdout).text(),
    new Response(p.stderr).text(),
    p.exited,
  ]);
  printed.push(stdout, stderr);
  let report:
    | {
        ok: boolean;
        hosts: {
          host: string;
          status: string;
          previous?: string;
          pruned?: string[];
          rollbackHealthy?: boolean;
          reason?: string;
        }[];
        skipped: string[];
      }
    | undefined;
  try {
    report = JSON.parse(stdout);
  } catch {}
  return { code, stdout, stderr, report };
}

const current = (i: number) => readlinkSync(join(hosts.hosts[i]!.dir, "opt", "gateway", "current"));
const as0 = (cmd: string) => hosts.sshAsDeploy(hosts.hosts[0]!, cmd);
const ready = (i: number) => hosts.exec(hosts.hosts[i]!, "curl -fsS -m 2 http://127.0.0.1:8080/readyz");

describe("npm run deploy over SSH", () => {
  test("v1 reaches both hosts one batch at a time; each answers /readyz and takes a task", async () => {
    const r = await deploy("gateway", "v1", "--batch", "1");
    expect(r.stderr).toContain("batch 2/2");
    expect(r.code).toBe(0);
    expect(r.report!.hosts.map((h) => h.status)).toEqual(["deployed", "deployed"]);
    for (const i of [0, 1]) {
      expect(current(i)).toBe("releases/v1");
      expect((await ready(i)).code).toBe(0);
      const post = await hosts.exec(
        hosts.hosts[i]!,
        `curl -sS -o /dev/null -w '%{http_code}' -X POST -H 'authorization: Bearer ${API_KEY}' -H 'content-type: application/json' -d '{"type":"turnstile","params":{"sitekey":"0x4AAAAAAAC3DHQFLr1GavRN","pageurl":"https://example.com/deploy/${i}"}}' http://127.0.0.1:8080/v1/tasks`,
      );
      expect(post.out).toBe("202");
    }
    // Deploying the same version again copies nothing and restarts onto the same release.
    const again = await deploy("gateway", "v1", "--batch", "2");
    expect(again.code).toBe(0);
    expect(again.stderr).toContain("already installed, checksum ok");
  }, 90_000);

  test("the gateway's secrets land as 0600 root files in a 0700 root folder, reach it as credentials, and are in no env file", async () => {
    const s = readStore(store);
    const want = appCredentials(s, "gateway", REGION);
    expect(Object.keys(want).sort()).toEqual(
      [
        "API_KEYS",
        "API_KEY_PEPPER",
        "DATABASE_PASSWORD",
        "NATS_PASSWORD",
        "WEBHOOK_SECRET",
        "WEBHOOK_SECRET_PREVIOUS",
      ].sort(),
    );
    for (const h of hosts.hosts) {
      const dir = join(h.dir, "etc", "credentials", "gateway");
      expect({ mode: statSync(dir).mode & 0o777, uid: statSync(dir).uid, gid: statSync(dir).gid }).toEqual({
        mode: 0o700,
        uid: 0,
        gid: 0,
      });
      expect(readdirSync(dir).sort()).toEqual(Object.keys(want).sort());
      for (const [name, value] of Object.entries(want)) {
        const st = statSync(join(dir, name));
        expect({ name, mode: st.mode & 0o777, uid: st.uid, gid: st.gid }).toEqual({
          name,
          mode: 0o600,
          uid: 0,
          gid: 0,
        });
        expect(readFileSync(join(dir, name), "utf8")).toBe(value);
      }
      // The running unit's own copies (systemd's $CREDENTIALS_DIRECTORY; the stand-in's run/credentials/).
      // The folder loaded whole (LoadCredential=gateway:<folder>): each a credential gateway_<NAME>.
      const running = join(h.dir, "run", "credentials", "gateway.service");
      expect(readdirSync(running).sort()).toEqual(
        Object.keys(want)
          .map((n) => `gateway_${n}`)
          .sort(),
      );
      expect(statSync(join(running, "gateway_API_KEY_PEPPER")).mode & 0o777).toBe(0o400);
      // The deploy user reads none of it.
      const peek = await hosts.sshAsDeploy(h, `cat '${join(dir, "API_KEY_PEPPER")}'`);
      expect(peek.code).not.toBe(0);
      expect(peek.out).toBe("");
    }
    // Deploying again writes the same values: nothing changed, which the host says.
    expect(printed.join("\n")).toContain("credentials of gateway: 6 in place, none changed");
  }, 30_000);

  test("host keys are pinned: a host whose key is not the one the inventory pins is refused before anything is copied", async () => {
    // The v1 deploy above went through with the right pins: dep-app-1's key, dep-app-2's fingerprint.
    const inv = JSON.parse(readFileSync(hosts.inventory, "utf8")) as { hosts: { hostKeys?: string[] }[] };
    const wrongKey = readFileSync(`${otherKey}.pub`, "utf8").trim().split(" ").slice(0, 2).join(" ");
    const wrongPrint = spawnSync("ssh-keygen", ["-l", "-E", "sha256", "-f", `${otherKey}.pub`], {
      encoding: "utf8",
    }).stdout.split(" ")[1]!;
    inv.hosts[0]!.hostKeys = [wrongKey];
    inv.hosts[1]!.hostKeys = [wrongPrint];
    const wrong = join(dist, "inventory-wrong-keys.json");
    writeFileSync(wrong, JSON.stringify(inv));
    const r = await deploy("gateway", "v3", "--batch", "2", "--hosts", wrong);
    expect(r.code).toBe(1);
    expect(r.report!.hosts.map((h) => [h.host, h.status])).toEqual([
      ["dep-app-1", "failed"],
      ["dep-app-2", "failed"],
    ]);
    // A pinned key: ssh itself refuses the connection; a pinned fingerprint: what the host offers matches none.
    expect(r.report!.hosts[0]!.reason).toContain("its host key is not the one pinned in the inventory's hostKeys");
    expect(r.report!.hosts[1]!.reason).toContain("matches none of the inventory's hostKeys");
    for (const [i, h] of hosts.hosts.entries()) {
      expect(existsSync(join(h.dir, "opt", "gateway", "releases", "v3"))).toBe(false);
      expect(current(i)).toBe("releases/v1");
    }
    // No pin at all: the inventory is refused, naming the field (ssh never asked to accept a new key).
    delete inv.hosts[0]!.hostKeys;
    writeFileSync(wrong, JSON.stringify(inv));
    const unpinned = await deploy("gateway", "v3", "--hosts", wrong);
    expect(unpinned.code).toBe(1);
    expect(unpinned.stderr).toContain("hosts.0.hostKeys: dep-app-1 is a deploy target and has no pinned host key");
    expect(existsSync(join(hosts.hosts[0]!.dir, "opt", "gateway", "releases", "v3"))).toBe(false);
  }, 60_000);

  test("the deploy logs in as `deploy`, not root; its sudo runs the deploy's commands and nothing else", async () => {
    const h = hosts.hosts[0]!;
    const as = (cmd: string) => hosts.sshAsDeploy(h, cmd);
    expect((await as("id -un")).out).toBe("deploy\n");
    expect((await as("id -u")).out.trim()).not.toBe("0");
    // Root cannot log in (PermitRootLogin no, as on the app hosts), even with the deploy's key.
    const root = spawnSync(
      "ssh",
      [
        "-F",
        "none",
        "-o",
        "BatchMode=yes",
        "-o",
        `UserKnownHostsFile=${hosts.knownHosts}`,
        "-o",
        "StrictHostKeyChecking=yes",
        "-i",
        hosts.key,
        `root@${h.ip}`,
        "true",
      ],
      { encoding: "utf8" },
    );
    expect(root.status).toBe(255);
    expect(root.stderr).toContain("Permission denied");
    // Allowed: the app units' verbs, and the install script (whose `ports` shows ports, no secret).
    expect((await as(`sudo -n ${h.systemctl} is-active --quiet gateway.service`)).code).toBe(0);
    expect(await as(`sudo -n ${h.install} ports`)).toEqual({ code: 0, out: "gateway 8080\n", err: "" });
    // Refused by sudo: a shell, another unit, a second unit riding along, another verb, reading a
    // secret, another target user, keeping the caller's environment.
    for (const cmd of [
      "sudo -n /bin/sh -c id",
      `sudo -n ${h.systemctl} restart ssh.service`,
      `sudo -n ${h.systemctl} stop gateway.service ssh.service`,
      `sudo -n ${h.systemctl} daemon-reload`,
      `sudo -n cat ${h.dir}/etc/gateway.env`,
      `sudo -n -u nobody ${h.install} ports`,
      `sudo -n -E ${h.install} ports`,
      `sudo -n env PATH=/tmp ${h.install} ports`,
    ]) {
      const r = await as(cmd);
      expect({ cmd, code: r.code, out: r.out }).toEqual({ cmd, code: 1, out: "" });
      expect({ cmd, err: r.err }).toEqual({
        cmd,
        err: expect.stringMatching(
          /^sudo: (a password is required|sorry, you are not allowed to preserve the environment)/,
        ),
      });
    }
    // Without sudo the deploy user reads the releases but writes nothing of root's, and reads no env file.
    expect((await as(`cat ${h.dir}/etc/gateway.env`)).err).toContain("Permission denied");
    expect((await as(`touch ${h.dir}/opt/gateway/releases/x`)).err).toContain("Permission denied");
    expect((await as(`ln -sfn /tmp ${h.dir}/opt/gateway/current`)).code).not.toBe(0);
    expect(current(0)).toBe("releases/v1");
    // The install script checks each argument: no path in a version, never the current release pruned.
    const sneaky = await as(`sudo -n ${h.install} switch gateway ../../../../tmp`);
    expect(sneaky.code).toBe(2);
    expect(sneaky.err).toContain("version: 1-32 lower-case letters");
    const prune = await as(`sudo -n ${h.install} prune gateway v1`);
    expect(prune.code).toBe(2);
    expect(prune.err).toContain("v1 is gateway's current release: not pruned");
    expect(existsSync(join(h.dir, "opt", "gateway", "releases", "v1", "gateway"))).toBe(true);
  }, 60_000);

  test("a release that does not come up is rolled back on its host, and the next batch is not touched", async () => {
    const r = await deploy("gateway", "v2", "--batch", "1");
    expect(r.code).toBe(1);
    expect(r.report!.ok).toBe(false);
    expect(r.report!.hosts).toHaveLength(1);
    expect(r.report!.hosts[0]).toMatchObject({
      host: "dep-app-1",
      status: "rolled-back",
      previous: "v1",
      rollbackHealthy: true,
    });
    expect(r.report!.skipped).toEqual(["dep-app-2"]);
    expect(r.stderr).toContain("rolling back");
    expect(current(0)).toBe("releases/v1");
    expect((await ready(0)).code).toBe(0);
    expect(existsSync(join(hosts.hosts[1]!.dir, "opt", "gateway", "releases", "v2"))).toBe(false);
    expect(current(1)).toBe("releases/v1");
    // The failed release's own output is on the host, for whoever looks into it.
    expect(readFileSync(join(hosts.hosts[0]!.dir, "run", "gateway.log"), "utf8")).toContain("gateway v2: cannot start");
  }, 90_000);

  test("the last 3 releases are kept (the current one always)", async () => {
    for (const v of ["v3", "v4", "v5"]) expect((await deploy("gateway", v, "--batch", "2")).code).toBe(0);
    for (const i of [0, 1]) {
      expect(current(i)).toBe("releases/v5");
      const left = (
        await hosts.exec(hosts.hosts[i]!, `ls '${join(hosts.hosts[i]!.dir, "opt", "gateway", "releases")}'`)
      ).out
        .trim()
        .split("\n")
        .sort();
      expect(left).toEqual(["v3", "v4", "v5"]);
      expect((await ready(i)).code).toBe(0);
    }
  }, 120_000);

  test("a binary that does not match its .sha256 is refused before any host is touched", async () => {
    const r = await deploy("gateway", "v6");
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("does not match its .sha256");
    for (const h of hosts.hosts) expect(existsSync(join(h.dir, "opt", "gateway", "releases", "v6"))).toBe(false);
    expect(current(0)).toBe("releases/v5");
  }, 60_000);

  test("only signed releases are installed: unsigned, signed by another key, a tampered checksum or binary: nothing is installed", async () => {
    const unsigned = await deploy("gateway", "v7");
    expect(unsigned.code).toBe(1);
    expect(unsigned.report!.hosts[0]!.reason).toContain(
      "gateway-v7-linux-x64.sha256.sig is missing: an unsigned release is refused",
    );
    for (const v of ["v8", "v9"]) {
      // v8: signed by a key the host does not trust; v9: its .sha256 no longer the line that was signed.
      const r = await deploy("gateway", v, "--batch", "1");
      expect(r.code).toBe(1);
      expect(r.report!.hosts[0]).toMatchObject({ host: "dep-app-1", status: "failed" });
      expect(r.report!.hosts[0]!.reason).toContain(`signature refused for gateway-${v}-linux-x64, nothing installed`);
      expect(r.report!.skipped).toEqual(["dep-app-2"]);
    }
    // The host's own check of the binary it receives: v10's real checksum and signature, another binary.
    copyFileSync(gw("v5"), gw("v10"));
    await writeSha(gw("v10"));
    const h = hosts.hosts[0]!;
    const sha = readFileSync(`${gw("v10")}.sha256`, "utf8").split(" ")[0]!;
    const sig = readFileSync(`${gw("v10")}.sha256.sig`).toString("base64");
    const tampered = await hosts.sshAsDeploy(h, `sudo -n ${h.install} release gateway v10 x64 ${sha} ${sig}`, gw("v2"));
    expect(tampered.code).toBe(3);
    expect(tampered.err).toContain(
      `checksum mismatch, nothing installed: the binary received has sha256 ${await sha256File(gw("v2"))}`,
    );
    for (const host of hosts.hosts)
      for (const v of ["v7", "v8", "v9", "v10"])
        expect({ host: host.name, v, installed: existsSync(join(host.dir, "opt", "gateway", "releases", v)) }).toEqual({
          host: host.name,
          v,
          installed: false,
        });
    // The same call with the binary that was signed installs it, its checksum and signature beside it.
    const good = await hosts.sshAsDeploy(h, `sudo -n ${h.install} release gateway v10 x64 ${sha} ${sig}`, gw("v10"));
    expect(good).toMatchObject({ code: 0, out: `installed gateway-v10-linux-x64: signature good, sha256 ${sha}\n` });
    expect(readFileSync(join(h.dir, "opt", "gateway", "releases", "v10", "gateway.sha256.sig"))).toEqual(
      readFileSync(`${gw("v10")}.sha256.sig`),
    );
    expect(await as0(`sudo -n ${h.install} prune gateway v10`)).toMatchObject({ code: 0 });
    expect(current(0)).toBe("releases/v5");
    expect((await ready(0)).code).toBe(0);
  }, 90_000);

  test("the solver: v1 is installed and started, tasks through the deployed gateway are solved; v3 starts beside it, idle until the rollout gives it shards", async () => {
    const first = await deploy("solver", "v1", "--batch", "2");
    expect(first.code).toBe(0);
    expect(first.stderr).toContain("solver@v1.service started beside no other version (metrics port 9464)");
    const h = hosts.hosts[0]!;
    const sub = await hosts.exec(
      h,
      `curl -fsS -X POST -H 'authorization: Bearer ${API_KEY}' -H 'content-type: application/json' -d '{"type":"turnstile","params":{"sitekey":"0x4AAAAAAAC3DHQFLr1GavRN","pageurl":"https://example.com/deploy/solved"}}' http://127.0.0.1:8080/v1/tasks`,
    );
    const id = (JSON.parse(sub.out) as { id: string }).id;
    const got = await hosts.exec(
      h,
      `curl -fsS -H 'authorization: Bearer ${API_KEY}' 'http://127.0.0.1:8080/v1/tasks/${id}?wait=30'`,
    );
    expect((JSON.parse(got.out) as { status: string }).status).toBe("completed");

    // A second version installs beside the first with its own metrics port and comes up idle:
    // it owns no shard until the rollout service moves some to it (apps/rollout), so v1 goes on
    // solving everything. The deploy waits for its /readyz and leaves both running.
    const second = await deploy("solver", "v3", "--batch", "2");
    expect(second.code).toBe(0);
    expect(second.stderr).toContain("solver@v3.service started beside v1 (metrics port 9465)");
    expect(second.report!.hosts.map((o) => o.status)).toEqual(["deployed", "deployed"]);
    for (const host of hosts.hosts) {
      const ctl = join(host.dir, "bin", "systemctl");
      expect(
        (await hosts.exec(host, `${ctl} is-active solver@v1.service; ${ctl} is-active solver@v3.service`)).out,
      ).toBe("active\nactive\n");
      expect(
        (
          await hosts.exec(
            host,
            "curl -fsS -m 2 http://127.0.0.1:9464/readyz && curl -fsS -m 2 http://127.0.0.1:9465/readyz",
          )
        ).out,
      ).toBe("ok\nok\n");
      expect(readFileSync(join(host.dir, "etc", "solver@v3.env"), "utf8")).toBe("METRICS_PORT=9465\n");
    }
    const again = await hosts.exec(
      h,
      `curl -fsS -X POST -H 'authorization: Bearer ${API_KEY}' -H 'content-type: application/json' -d '{"type":"turnstile","params":{"sitekey":"0x4AAAAAAAC3DHQFLr1GavRN","pageurl":"https://example.com/deploy/after-v3"}}' http://127.0.0.1:8080/v1/tasks`,
    );
    const id2 = (JSON.parse(again.out) as { id: string }).id;
    const got2 = await hosts.exec(
      h,
      `curl -fsS -H 'authorization: Bearer ${API_KEY}' 'http://127.0.0.1:8080/v1/tasks/${id2}?wait=30'`,
    );
    expect((JSON.parse(got2.out) as { status: string }).status).toBe("completed");
  }, 120_000);

  test("a rotated API key reaches the gateways with the next deploy; the one before stays valid until retired", async () => {
    const status = (key: string) =>
      hosts.exec(
        hosts.hosts[1]!,
        `curl -sS -o /dev/null -w '%{http_code}' -H 'authorization: Bearer ${key}' http://127.0.0.1:8080/v1/usage`,
      );
    const rotate = await secrets("rotate", "api-keys");
    expect(rotate.code).toBe(0);
    expect(rotate.stdout).toContain("npm run deploy -- gateway <its running version> --hosts inventory.json");
    const fresh = readStore(store).secrets["api-keys"]!.value;
    expect(fresh).not.toBe(API_KEY);
    expect((await status(fresh)).out).toBe("401");
    const r = await deploy("gateway", "v5", "--batch", "2");
    expect(r.code).toBe(0);
    expect(r.stderr).toContain("credentials of gateway: 6 in place, changed: API_KEYS");
    expect((await status(fresh)).out).toBe("200");
    expect((await status(API_KEY)).out).toBe("200");
    expect((await secrets("retire", "api-keys")).code).toBe(0);
    expect((await deploy("gateway", "v5", "--batch", "2")).code).toBe(0);
    expect((await status(fresh)).out).toBe("200");
    expect((await status(API_KEY)).out).toBe("401");
  }, 90_000);

  test("no secret is on any command line the hosts saw, in sudo's log, in an app's log, in an env file or in what the deploy printed", async () => {
    const s = readStore(store);
    // Every value of the store (those delivered, the others, the previous ones), and the key retired since.
    const values = [
      ...new Set(
        [...Object.values(s.secrets).flatMap((e) => [e.value, e.previous?.value ?? ""]), API_KEY].filter(
          (v) => v.length >= 16,
        ),
      ),
    ];
    expect(values).toContain(appCredentials(s, "gateway", REGION).API_KEY_PEPPER!);
    const root = join(hosts.hosts[0]!.dir, "..");
    const files = [
      hosts.commandsLog,
      hosts.sudoLog,
      ...readdirSync(root)
        .filter((f) => f.endsWith(".log"))
        .map((f) => join(root, f)),
      ...hosts.hosts.flatMap((h) => [
        ...readdirSync(join(h.dir, "run"))
          .filter((f) => f.endsWith(".log"))
          .map((f) => join(h.dir, "run", f)),
        ...readdirSync(join(h.dir, "etc"))
          .filter((f) => f.endsWith(".env"))
          .map((f) => join(h.dir, "etc", f)),
      ]),
    ];
    const texts = [
      ...files.map((f) => ({ where: f, text: readFileSync(f, "utf8") })),
      { where: "printed", text: printed.join("\n") },
    ];
    const commands = readFileSync(hosts.commandsLog, "utf8").split("\n--\n").filter(Boolean);
    // The record is real: every deploy's steps are in it, the credentials step among them.
    expect(commands.filter((c) => c.includes("credentials gateway")).length).toBeGreaterThanOrEqual(4);
    expect(readFileSync(hosts.sudoLog, "utf8")).toContain("credentials gateway");
    for (const { where, text } of texts)
      for (const v of values) expect({ where, leaked: text.includes(v) }).toEqual({ where, leaked: false });
    console.log(
      `[deploy-ssh] nothing leaked: ${values.length} secret values searched in ${commands.length} SSH command lines, sudo's log, ${files.length - 2} log and env files and ${printed.length} outputs of the deploy and secrets commands (${texts.reduce((n, t) => n + t.text.length, 0)} characters)`,
    );
  }, 30_000);

  test("bad arguments and a bad inventory are refused with the field named", () => {
    const noHosts = Bun.spawnSync([
      process.execPath,
      join(import.meta.dir, "..", "infra", "deploy", "deploy.ts"),
      "gateway",
      "v1",
    ]);
    expect(noHosts.exitCode).toBe(2);
    expect(noHosts.stderr.toString()).toContain("--hosts");
    const badVersion = Bun.spawnSync([
      process.execPath,
      join(import.meta.dir, "..", "infra", "deploy", "deploy.ts"),
      "gateway",
      "V1.0",
      "--hosts",
      hosts.inventory,
    ]);
    expect(badVersion.exitCode).toBe(2);
    expect(badVersion.stderr.toString()).toContain("version");
    const inv = join(dist, "bad-inventory.json");
    writeFileSync(
      inv,
      JSON.stringify({
        hosts: [{ name: "x", region: REGION, roles: ["app"], ssh: { host: "10.0.0.1", port: 99999 } }],
      }),
    );
    const bad = Bun.spawnSync([
      process.execPath,
      join(import.meta.dir, "..", "infra", "deploy", "deploy.ts"),
      "gateway",
      "v1",
      "--hosts",
      inv,
    ]);
    expect(bad.exitCode).toBe(1);
    expect(bad.stderr.toString()).toContain("hosts.0.ssh.port");
    const known = Bun.spawnSync([
      process.execPath,
      join(import.meta.dir, "..", "infra", "deploy", "deploy.ts"),
      "gateway",
      "v1",
      "--hosts",
      hosts.inventory,
      "--known-hosts",
      hosts.knownHosts,
    ]);
    expect(known.exitCode).toBe(2);
    expect(known.stderr.toString()).toContain('Unrecognized key: "known-hosts"');
  });
});
