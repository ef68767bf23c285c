import { expect, test } from "bun:test";
import { parseTokens, sessions, TokenConfigError } from "./tokens.ts";

const op = "op-token-0123456789abcdef";
const view = "view-token-0123456789abcdef";

test("parseTokens: name:role:token entries, comma or newline separated, tokens with colons", () => {
  const t = parseTokens(
    `alice:operator:${op}\n# a comment, with commas: a:b:c\nbob:viewer:${view}, carol:viewer:a:b:c:0123456789abcdef`,
  );
  expect(t.map((p) => `${p.name}/${p.role}`)).toEqual(["alice/operator", "bob/viewer", "carol/viewer"]);
  expect(t.check(op)).toEqual({ name: "alice", role: "operator" });
  expect(t.check(view)).toEqual({ name: "bob", role: "viewer" });
  expect(t.check("a:b:c:0123456789abcdef")).toEqual({ name: "carol", role: "viewer" });
  expect(t.check("nope")).toBeUndefined();
  expect(t.check("")).toBeUndefined();
});

test("parseTokens: bad entries are named without their token", () => {
  const secret = "s3cret-s3cret-s3cret";
  for (const [text, field] of [
    [`alice:admin:${secret}`, "role"],
    [`alice:viewer:short`, "16 characters"],
    [`:viewer:${secret}`, "name"],
    [`a:viewer:${secret},a:operator:${secret}x`, "twice"],
  ] as const) {
    let err: Error | undefined;
    try {
      parseTokens(text);
    } catch (e) {
      err = e as Error;
    }
    expect(err).toBeInstanceOf(TokenConfigError);
    expect(err!.message).toContain(field);
    expect(err!.message).not.toContain(secret);
  }
});

test("sessions: kept by the server, expiring, revocable; a cookie that was not issued is nothing", () => {
  const s = sessions({ ttlMs: 1000 });
  const c = s.issue({ name: "ops.alice", role: "viewer" }, 0);
  expect(c).not.toContain("ops.alice");
  expect(s.verify(c, 500)).toMatchObject({ name: "ops.alice", role: "viewer" });
  expect(s.verify(c, 500)!.sid).toMatch(/^[0-9a-f]{64}$/);
  expect(s.verify(c, 1500)).toBeUndefined();
  expect(s.verify(c, 500)).toBeUndefined();
  expect(sessions({ ttlMs: 1000 }).verify(s.issue({ name: "a", role: "operator" }, 0), 500)).toBeUndefined();
  expect(s.verify(undefined)).toBeUndefined();
  expect(s.verify("garbage")).toBeUndefined();
});

test("sessions: sign-out revokes the one session; others stay; at most maxSessions live", () => {
  const s = sessions({ maxSessions: 2 });
  const a = s.issue({ name: "a", role: "operator" });
  const b = s.issue({ name: "a", role: "operator" });
  const sidA = s.verify(a)!.sid;
  expect(s.revoke(a)).toBe(sidA);
  expect(s.revoke(a)).toBeUndefined();
  expect(s.verify(a)).toBeUndefined();
  expect(s.verify(b)).toMatchObject({ name: "a" });
  const c = s.issue({ name: "c", role: "viewer" });
  s.issue({ name: "d", role: "viewer" });
  expect(s.size()).toBe(2);
  expect(s.verify(b)).toBeUndefined();
  expect(s.verify(c)).toMatchObject({ name: "c" });
});
