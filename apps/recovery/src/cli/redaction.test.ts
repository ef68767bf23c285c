// The CLI as an operator runs it: no password of a URL is printed (issue 14). Nothing listens on
// the ports used here, so every probe fails and prints what it tried.
import { afterAll, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = mkdtempSync(join(tmpdir(), "recovery-redaction-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const cli = join(import.meta.dir, "..", "cli.ts");
const env = {
  PATH: process.env.PATH ?? "",
  HOME: dir,
  NATS_URL: "nats://127.0.0.1:1",
  DATABASE_URL: "postgres://dbuser:db-secret@127.0.0.1:1/x",
  SNAPSHOT_DIR: dir,
  PROVIDER_URL: "http://puser:provider-secret@127.0.0.1:1/",
  PROVIDER_KEY: "k",
  LOG_LEVEL: "silent",
};
const run = (...args: string[]) => {
  const r = spawnSync(process.execPath, [cli, ...args], { env, encoding: "utf8", timeout: 30_000 });
  return { code: r.status, out: `${r.stdout}${r.stderr}`, err: r.stderr };
};

test("assess prints the provider's URL without its userinfo, as text and as JSON", () => {
  for (const args of [["assess"], ["assess", "--json"]]) {
    const r = run(...args);
    expect(r.code).toBe(1);
    expect(r.out).toContain("127.0.0.1:1");
    expect(r.out).toContain("***@127.0.0.1:1");
    expect(r.out).not.toContain("provider-secret");
    expect(r.out).not.toContain("puser");
    expect(r.out).not.toContain("db-secret");
  }
}, 30_000);

test("restore --into with a password: warned on stderr (process list), the password never printed", () => {
  const r = run("restore", "latest", "--into", "postgres://u:into-secret@127.0.0.1:1/x", "--no-replay");
  expect(r.err).toContain("--into is visible to every user of this host in the process list");
  expect(r.out).not.toContain("into-secret");
  // Without --into or RESTORE_INTO_URL: a usage error naming both.
  const none = run("restore", "latest", "--no-replay");
  expect(none.code).toBe(2);
  expect(none.err).toContain("RESTORE_INTO_URL");
}, 30_000);
