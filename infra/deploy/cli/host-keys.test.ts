import { afterAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createKnownHosts, fingerprintOf, knownHostsName, pinnedLines } from "./host-keys.ts";
import { Host, Inventory } from "./inventory.ts";

const dir = mkdtempSync(join(tmpdir(), "host-keys-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A fresh ed25519 key: its public line (with a comment, as in a .pub file) and ssh-keygen's own fingerprint of it. */
function keypair(name: string): { pub: string; fingerprint: string } {
  const key = join(dir, name);
  expect(spawnSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", `root@${name}`, "-f", key]).status).toBe(0);
  const fingerprint = spawnSync("ssh-keygen", ["-l", "-E", "sha256", "-f", `${key}.pub`], {
    encoding: "utf8",
  }).stdout.split(" ")[1]!;
  return { pub: readFileSync(`${key}.pub`, "utf8").trim(), fingerprint };
}

const a = keypair("a");
const b = keypair("b");
const typeAndKey = (pub: string) => pub.split(" ").slice(0, 2).join(" ");
const host = (hostKeys: string[], port = 22) =>
  Host.parse({ name: "fsn1-app-1", region: "fsn1", roles: ["app"], ssh: { host: "203.0.113.7", port }, hostKeys });

describe("pinned host keys", () => {
  test("a fingerprint is ssh-keygen's; a key's comment is dropped; anything else in hostKeys is refused with the field named", () => {
    expect(fingerprintOf(a.pub)).toBe(a.fingerprint);
    expect(host([a.pub]).hostKeys).toEqual([typeAndKey(a.pub)]);
    expect(host([a.fingerprint]).hostKeys).toEqual([a.fingerprint]);
    const bad = Host.safeParse({
      name: "x",
      region: "fsn1",
      roles: ["app"],
      ssh: { host: "h" },
      hostKeys: ["AAAAC3NzaC1lZDI1NTE5"],
    });
    expect(bad.success).toBe(false);
    expect(JSON.stringify(bad.error?.issues[0]?.path)).toBe('["hostKeys",0]');
  });

  test("an app host without a pinned key is refused by the inventory, naming the field; other roles need none", () => {
    const r = Inventory.safeParse({
      hosts: [
        { name: "fsn1-nats-1", region: "fsn1", roles: ["nats"], ssh: { host: "n" } },
        { name: "fsn1-app-1", region: "fsn1", roles: ["app"], ssh: { host: "h" } },
      ],
    });
    expect(r.success).toBe(false);
    expect(r.error?.issues.map((i) => i.path.join("."))).toEqual(["hosts.1.hostKeys"]);
  });

  test("known_hosts holds the pinned keys, and of what the host offers only a key with a pinned fingerprint", async () => {
    expect(pinnedLines(host([a.pub]), [])).toEqual([`203.0.113.7 ${typeAndKey(a.pub)}`]);
    expect(pinnedLines(host([a.fingerprint], 2222), [typeAndKey(b.pub), typeAndKey(a.pub)])).toEqual([
      `[203.0.113.7]:2222 ${typeAndKey(a.pub)}`,
    ]);
    expect(knownHostsName(host([a.pub], 2222))).toBe("[203.0.113.7]:2222");
    // The host offers another key than the pinned fingerprint's: refused, and the file stays empty.
    const kh = createKnownHosts(join(dir, "known_hosts"), async () => [typeAndKey(b.pub)]);
    const refused = await kh.pin(host([a.fingerprint]));
    expect(refused).toContain("matches none of the inventory's hostKeys");
    expect(refused).toContain(b.fingerprint);
    expect(readFileSync(kh.file, "utf8")).toBe("");
    expect(await kh.pin(host([b.fingerprint]))).toBeUndefined();
    expect(readFileSync(kh.file, "utf8")).toBe(`203.0.113.7 ${typeAndKey(b.pub)}\n`);
  });
});
