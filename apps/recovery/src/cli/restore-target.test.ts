// `restore`'s target without a password in the process arguments (issue 14).
import { afterAll, expect, test } from "bun:test";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { passfilePassword } from "../adapters/pgpass.ts";
import { INTO_PASSWORD_WARNING, restoreTarget } from "./restore-target.ts";

const dir = mkdtempSync(join(tmpdir(), "restore-target-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const noFile = { PGPASSFILE: join(dir, "none") };

test("--into with a password still works, with a warning that it is visible in the process list", () => {
  const warned: string[] = [];
  expect(restoreTarget({ into: "postgres://u:pw@h:5432/d", env: noFile, warn: (l) => warned.push(l) })).toBe(
    "postgres://u:pw@h:5432/d",
  );
  expect(warned).toEqual([INTO_PASSWORD_WARNING]);
  expect(INTO_PASSWORD_WARNING).toContain("process list");
  expect(INTO_PASSWORD_WARNING).not.toContain("pw");
});

test("the target from RESTORE_INTO_URL (no argument at all), or --into without a password: no warning", () => {
  const warned: string[] = [];
  const warn = (l: string) => warned.push(l);
  expect(restoreTarget({ into: undefined, env: { ...noFile, RESTORE_INTO_URL: "postgres://u:pw@h/d" }, warn })).toBe(
    "postgres://u:pw@h/d",
  );
  // With PGPASSWORD the URL stays as given (the driver and the pg tools read the variable).
  expect(restoreTarget({ into: "postgres://u@h/d", env: { ...noFile, PGPASSWORD: "pw" }, warn })).toBe(
    "postgres://u@h/d",
  );
  expect(warned).toEqual([]);
});

test("without any target: a usage error naming --into and RESTORE_INTO_URL", () => {
  expect(() => restoreTarget({ into: undefined, env: noFile, warn: () => {} })).toThrow(/--into.*RESTORE_INTO_URL/);
});

test("the password from the passfile (PGPASSFILE): first matching line, wildcards and escapes; ignored when others can read it", () => {
  const file = join(dir, "pgpass");
  writeFileSync(
    file,
    [
      "# comment",
      "other:5432:*:u:nope",
      "h:5432:d\\:x:u:colon-db",
      "h:*:d:u:pa\\:ss:word",
      "*:*:*:*:fallback",
      "",
    ].join("\n"),
  );
  chmodSync(file, 0o600);
  const env = { PGPASSFILE: file };
  expect(passfilePassword("postgres://u@h/d", env)).toBe("pa:ss:word");
  expect(passfilePassword("postgres://u@h:5432/d:x", env)).toBe("colon-db");
  expect(passfilePassword("postgres://z@elsewhere:6000/q", env)).toBe("fallback");
  const url = restoreTarget({ into: "postgres://u@h/d", env, warn: () => {} });
  expect(new URL(url).password).toBe(encodeURIComponent("pa:ss:word"));
  chmodSync(file, 0o644);
  expect(passfilePassword("postgres://u@h/d", env)).toBeUndefined();
});
