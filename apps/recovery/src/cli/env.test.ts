// Who the CLI's audit entries name (issue 14): the authenticated login, never only what --by or USER claim.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { hostname } from "node:os";
import { actorOf, loginOf } from "./env.ts";

const alice = { uid: 1000, username: "alice", sudoUser: undefined, host: "ops-1" };

test("the login of the process's uid and the host; --by is kept but never replaces the login", () => {
  expect(actorOf(undefined, alice)).toBe("alice@ops-1");
  expect(actorOf("ops-team", alice)).toBe("ops-team@ops-1 (login alice)");
  expect(actorOf("alice", alice)).toBe("alice@ops-1");
});

test("SUDO_USER counts only under sudo (uid 0); USER is not read at all", () => {
  expect(loginOf({ ...alice, sudoUser: "mallory" })).toBe("alice");
  expect(loginOf({ uid: 0, username: "root", sudoUser: "alice" })).toBe("alice");
  expect(loginOf({ uid: 0, username: "root", sudoUser: undefined })).toBe("root");
  const before = process.env.USER;
  process.env.USER = "someone-else";
  try {
    // (Bun's os.userInfo().username would say "someone-else": it reads USER.)
    const account = spawnSync("id", ["-un"], { encoding: "utf8" }).stdout.trim();
    expect(actorOf(undefined)).toBe(
      `${process.getuid?.() === 0 && process.env.SUDO_USER ? process.env.SUDO_USER : account}@${hostname()}`,
    );
    expect(actorOf(undefined)).not.toContain("someone-else");
  } finally {
    if (before === undefined) delete process.env.USER;
    else process.env.USER = before;
  }
});
