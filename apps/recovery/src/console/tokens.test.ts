import { expect, test } from "bun:test";
import { parseTokens, sessions, TokenConfigError } from "./tokens.ts";

const op = "op-token-0123456789abcdef";
const view = "view-token-0123456789abcdef";

test("parseTokens: name:role:token entries, comma or newline separated, tokens with colons", () => {
  const t = parseTokens(`alice:operator:${op}\n# a comment, with commas: a:b:c\nbob:viewer:${view}, carol:viewer:a:b:c:0123456789abcdef`);
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

test("sessions: signed, expiring, tamper-proof; names with dots", () => {
  const s = sessions(Buffer.alloc(32, 7), 1000);
  const c = s.issue({ name: "ops.alice", role: "viewer" }, 0);
  expect(s.verify(c, 500)).toEqual({ name: "ops.alice", role: "viewer" });
  expect(s.verify(c, 1500)).toBeUndefined();
  expect(s.verify(c.replace(".viewer.", ".operator."), 500)).toBeUndefined();
  expect(sessions(Buffer.alloc(32, 8), 1000).verify(c, 500)).toBeUndefined();
  expect(s.verify(undefined)).toBeUndefined();
  expect(s.verify("garbage")).toBeUndefined();
});
