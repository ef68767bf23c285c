// The deploy command's own refusals, before it reaches any host: missing or bad arguments and a
// bad inventory are refused with the field named (exit 2 for arguments, 1 for the inventory).
// What it does to real hosts is tested on the rehearsal's fleet (tests/support/deploy-on-fleet.ts).
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const DEPLOY = join(import.meta.dir, "deploy.ts");
const dir = mkdtempSync(join(tmpdir(), "deploy-args-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const deploy = (...args: string[]) => {
  const r = Bun.spawnSync([process.execPath, DEPLOY, ...args]);
  return { code: r.exitCode, stderr: r.stderr.toString() };
};

const inventory = (hosts: unknown[]) => {
  const path = join(dir, `inventory-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(path, JSON.stringify({ hosts }));
  return path;
};

const good = {
  name: "app-1",
  region: "fsn1",
  roles: ["app"],
  ssh: { host: "10.0.1.10" },
  hostKeys: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOps"],
};

test("no --hosts, a bad version, an unknown flag: refused naming it (exit 2)", () => {
  const noHosts = deploy("gateway", "v1");
  expect(noHosts).toMatchObject({ code: 2 });
  expect(noHosts.stderr).toContain("--hosts");
  const badVersion = deploy("gateway", "V1.0", "--hosts", inventory([good]));
  expect(badVersion.code).toBe(2);
  expect(badVersion.stderr).toContain("version");
  const unknown = deploy("gateway", "v1", "--hosts", inventory([good]), "--known-hosts", "/tmp/x");
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toContain('Unrecognized key: "known-hosts"');
});

test("a bad inventory: a port out of range, a stand-in systemctl, no pinned host key: refused naming the field (exit 1)", () => {
  const badPort = deploy("gateway", "v1", "--hosts", inventory([{ ...good, ssh: { host: "10.0.0.1", port: 99999 } }]));
  expect(badPort.code).toBe(1);
  expect(badPort.stderr).toContain("hosts.0.ssh.port");
  // The service manager is the one the deploy user's sudoers rule names: no inventory overrides it.
  const standIn = deploy("gateway", "v1", "--hosts", inventory([{ ...good, systemctl: "/tmp/systemctl" }]));
  expect(standIn.code).toBe(1);
  expect(standIn.stderr).toContain("systemctl");
  const { hostKeys: _, ...unpinned } = good;
  const noPin = deploy("gateway", "v1", "--hosts", inventory([unpinned]));
  expect(noPin.code).toBe(1);
  expect(noPin.stderr).toContain("hosts.0.hostKeys: app-1 is a deploy target and has no pinned host key");
});
