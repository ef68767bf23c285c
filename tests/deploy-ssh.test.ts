// The deploy command (`npm run deploy`, issue 18) against real SSH: two hosts, each a network
// namespace running Debian's sshd, receive the compiled gateway over SSH, switch `current`, restart
// it (a stand-in for systemctl: systemd cannot run inside a namespace) and wait for /readyz; a
// release that does not come up is rolled back on its host and stops the deploy before the next batch.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, copyFileSync, existsSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createEmulator, type Emulator } from "@pipeline/emulator";
import { natsEnv } from "@pipeline/shared/localstack";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@pipeline/shared/testing";
import { binaryName, buildBinary, sha256File } from "../infra/build.ts";
import { startRelay, type Relay } from "./support/relay.ts";
import { startSshHosts, type SshHosts } from "./support/ssh-hosts.ts";

const REGION = "dep";
const API_KEY = "deploy-client-key-0001-0123456789abcdef"; // 32+ characters: a production gateway
let hosts: SshHosts;
let nats: TestNats;
let tdb: TestDatabase;
let dist: string;
const relays: Relay[] = [];
let emu: Emulator;
const PROVIDER_KEY = "deploy-provider-key-0001";

async function writeSha(path: string) {
  writeFileSync(`${path}.sha256`, `${await sha256File(path)}  ${path.split("/").pop()}\n`);
}

beforeAll(async () => {
  dist = mkdtempSync(join(tmpdir(), "pipeline-dist-"));
  const [v1, s1] = await Promise.all([buildBinary({ app: "gateway", arch: "x64", version: "v1", outDir: dist }), buildBinary({ app: "solver", arch: "x64", version: "v1", outDir: dist })]);
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
  writeFileSync(join(dist, `${binaryName("gateway", "v6", "x64")}.sha256`), `${"0".repeat(64)}  ${binaryName("gateway", "v6", "x64")}\n`);

  [hosts, nats, tdb] = await Promise.all([startSshHosts(["dep-app-1", "dep-app-2"], REGION), startTestNats({ regions: [REGION], provision: true }), createTestDatabase("deploy")]);
  const pg = new URL(tdb.url);
  for (const h of hosts.hosts) {
    // The host reaches this machine's NATS and Postgres through relays on its end of the link.
    const [n, p, e] = await Promise.all([
      startRelay({ host: "127.0.0.1", port: nats.port }, { listenHost: h.peerIp }),
      startRelay({ host: "127.0.0.1", port: Number(pg.port) }, { listenHost: h.peerIp }),
      startRelay({ host: "127.0.0.1", port: Number(new URL(emu.url).port) }, { listenHost: h.peerIp }),
    ]);
    relays.push(n, p, e);
    const solverAuth = natsEnv(nats, "solver");
    writeFileSync(join(h.dir, "etc", "solver.env"), `PROVIDER_URL=http://${h.peerIp}:${e.port}\nPROVIDER_KEY=${PROVIDER_KEY}\nFIRST_POLL_MS=50\nPOLL_INTERVAL_MS=100\nNATS_USER=${solverAuth.NATS_USER}\nNATS_PASSWORD=${solverAuth.NATS_PASSWORD}\n`, { mode: 0o600 });
    const auth = natsEnv(nats, "gateway");
    const dbUrl = new URL(tdb.url);
    dbUrl.hostname = h.peerIp;
    dbUrl.port = String(p.port);
    writeFileSync(join(h.dir, "etc", "common.env"), `NATS_URL=nats://${h.peerIp}:${n.port}\nDATABASE_URL=${dbUrl}\nREGION=${REGION}\nLOG_LEVEL=info\n`, { mode: 0o600 });
    writeFileSync(join(h.dir, "etc", "gateway.env"), `GATEWAY_PORT=8080\nAPI_KEYS=${API_KEY}\nNATS_USER=${auth.NATS_USER}\nNATS_PASSWORD=${auth.NATS_PASSWORD}\n`, { mode: 0o600 });
  }
}, 120_000);

afterAll(async () => {
  await hosts?.stop();
  await Promise.all(relays.map((r) => r.stop()));
  await Promise.all([nats?.dispose(), tdb?.drop(), emu?.stop()]);
  if (dist) rmSync(dist, { recursive: true, force: true });
});

/** Runs the deploy command (async: the relays the hosts use live in this process). */
async function deploy(app: string, version: string, ...extra: string[]) {
  const p = Bun.spawn(
    [process.execPath, join(import.meta.dir, "..", "infra", "deploy", "deploy.ts"), app, version, "--hosts", hosts.inventory, "--dist", dist, "--ssh-key", hosts.key, "--known-hosts", hosts.knownHosts, "--health-timeout", "15000", "--json", ...extra],
    { env: { ...process.env }, stdout: "pipe", stderr: "pipe" },
  );
  const [stdout, stderr, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  let report: { ok: boolean; hosts: { host: string; status: string; previous?: string; pruned?: string[]; rollbackHealthy?: boolean }[]; skipped: string[] } | undefined;
  try {
    report = JSON.parse(stdout);
  } catch {}
  return { code, stdout, stderr, report };
}

const current = (i: number) => readlinkSync(join(hosts.hosts[i]!.dir, "opt", "gateway", "current"));
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

  test("a release that does not come up is rolled back on its host, and the next batch is not touched", async () => {
    const r = await deploy("gateway", "v2", "--batch", "1");
    expect(r.code).toBe(1);
    expect(r.report!.ok).toBe(false);
    expect(r.report!.hosts).toHaveLength(1);
    expect(r.report!.hosts[0]).toMatchObject({ host: "dep-app-1", status: "rolled-back", previous: "v1", rollbackHealthy: true });
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
      const left = (await hosts.exec(hosts.hosts[i]!, `ls '${join(hosts.hosts[i]!.dir, "opt", "gateway", "releases")}'`)).out.trim().split("\n").sort();
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
    const got = await hosts.exec(h, `curl -fsS -H 'authorization: Bearer ${API_KEY}' 'http://127.0.0.1:8080/v1/tasks/${id}?wait=30'`);
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
      expect((await hosts.exec(host, `${ctl} is-active solver@v1.service; ${ctl} is-active solver@v3.service`)).out).toBe("active\nactive\n");
      expect((await hosts.exec(host, "curl -fsS -m 2 http://127.0.0.1:9464/readyz && curl -fsS -m 2 http://127.0.0.1:9465/readyz")).out).toBe("ok\nok\n");
      expect(readFileSync(join(host.dir, "etc", "solver@v3.env"), "utf8")).toBe("METRICS_PORT=9465\n");
    }
    const again = await hosts.exec(
      h,
      `curl -fsS -X POST -H 'authorization: Bearer ${API_KEY}' -H 'content-type: application/json' -d '{"type":"turnstile","params":{"sitekey":"0x4AAAAAAAC3DHQFLr1GavRN","pageurl":"https://example.com/deploy/after-v3"}}' http://127.0.0.1:8080/v1/tasks`,
    );
    const id2 = (JSON.parse(again.out) as { id: string }).id;
    const got2 = await hosts.exec(h, `curl -fsS -H 'authorization: Bearer ${API_KEY}' 'http://127.0.0.1:8080/v1/tasks/${id2}?wait=30'`);
    expect((JSON.parse(got2.out) as { status: string }).status).toBe("completed");
  }, 120_000);

  test("bad arguments and a bad inventory are refused with the field named", () => {
    const noHosts = Bun.spawnSync([process.execPath, join(import.meta.dir, "..", "infra", "deploy", "deploy.ts"), "gateway", "v1"]);
    expect(noHosts.exitCode).toBe(2);
    expect(noHosts.stderr.toString()).toContain("--hosts");
    const badVersion = Bun.spawnSync([process.execPath, join(import.meta.dir, "..", "infra", "deploy", "deploy.ts"), "gateway", "V1.0", "--hosts", hosts.inventory]);
    expect(badVersion.exitCode).toBe(2);
    expect(badVersion.stderr.toString()).toContain("version");
    const inv = join(dist, "bad-inventory.json");
    writeFileSync(inv, JSON.stringify({ hosts: [{ name: "x", region: REGION, roles: ["app"], ssh: { host: "10.0.0.1", port: 99999 } }] }));
    const bad = Bun.spawnSync([process.execPath, join(import.meta.dir, "..", "infra", "deploy", "deploy.ts"), "gateway", "v1", "--hosts", inv]);
    expect(bad.exitCode).toBe(1);
    expect(bad.stderr.toString()).toContain("hosts.0.ssh.port");
  });
});
