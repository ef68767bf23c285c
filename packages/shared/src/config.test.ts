import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { ConfigError, parseEnv, withCredentials } from "./config.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A credentials directory as systemd makes it for a unit: one file per credential. */
function credentials(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "creds-"));
  dirs.push(dir);
  for (const [name, value] of Object.entries(files)) writeFileSync(join(dir, name), value, { mode: 0o400 });
  return dir;
}

const Schema = z.object({
  API_KEY_PEPPER: z.string().min(32, "at least 32 characters"),
  NATS_PASSWORD: z.string().min(1).optional(),
  DATABASE_URL: z.string().regex(/^postgres:\/\//, "must be a postgres:// URL"),
});

const PEPPER = "p".repeat(40);

describe("settings from systemd credentials", () => {
  test("without CREDENTIALS_DIRECTORY the environment is read as it is", () => {
    expect(parseEnv(Schema, { API_KEY_PEPPER: PEPPER, DATABASE_URL: "postgres://u:pw@h/db" })).toEqual({
      API_KEY_PEPPER: PEPPER,
      DATABASE_URL: "postgres://u:pw@h/db",
    });
  });

  test("a setting comes from the credential named for it (one trailing newline dropped); an empty file is unset", () => {
    const dir = credentials({ API_KEY_PEPPER: `${PEPPER}\n`, NATS_PASSWORD: "", README: "x", "not-a-setting": "y" });
    expect(parseEnv(Schema, { CREDENTIALS_DIRECTORY: dir, DATABASE_URL: "postgres://u@h/db" })).toEqual({
      API_KEY_PEPPER: PEPPER,
      DATABASE_URL: "postgres://u@h/db",
    });
  });

  test("a credential loaded from a directory (`<id>_<SETTING>`, as systemd names them) is read as that setting", () => {
    const dir = credentials({ regions_NATS_PASSWORD_HEL1: "secret-hel1\n" });
    expect(withCredentials({ CREDENTIALS_DIRECTORY: dir }).NATS_PASSWORD_HEL1).toBe("secret-hel1");
  });

  test("DATABASE_PASSWORD goes into DATABASE_URL (and a region's into its own URL)", () => {
    const dir = credentials({ DATABASE_PASSWORD: "pw-fsn1", DATABASE_PASSWORD_HEL1: "pw-hel1" });
    const s = withCredentials({
      CREDENTIALS_DIRECTORY: dir,
      DATABASE_URL: "postgres://pipeline_rollout@10.0.1.30:5432/pipeline?sslmode=verify-full",
      DATABASE_URL_HEL1: "postgres://pipeline_rollout@10.0.2.30:5432/pipeline?sslmode=verify-full",
    });
    expect(s.DATABASE_URL).toBe("postgres://pipeline_rollout:pw-fsn1@10.0.1.30:5432/pipeline?sslmode=verify-full");
    expect(s.DATABASE_URL_HEL1).toBe("postgres://pipeline_rollout:pw-hel1@10.0.2.30:5432/pipeline?sslmode=verify-full");
  });

  test("a missing credential names the setting and where it was looked for, never a value", () => {
    const dir = credentials({ NATS_PASSWORD: "nats-secret-value" });
    const err = (() => {
      try {
        parseEnv(Schema, { CREDENTIALS_DIRECTORY: dir, DATABASE_URL: "postgres://u@h/db" });
      } catch (e) {
        return e as ConfigError;
      }
    })();
    expect(err).toBeInstanceOf(ConfigError);
    expect(err!.fields).toEqual(["API_KEY_PEPPER"]);
    expect(err!.message).toContain(`API_KEY_PEPPER: `);
    expect(err!.message).toContain(`no credential API_KEY_PEPPER in ${dir}`);
    expect(err!.message).not.toContain("nats-secret-value");
  });

  test("a bad credential is named without its value", () => {
    const dir = credentials({ API_KEY_PEPPER: "short-secret" });
    expect(() => parseEnv(Schema, { CREDENTIALS_DIRECTORY: dir, DATABASE_URL: "postgres://u@h/db" })).toThrow(
      /API_KEY_PEPPER: at least 32 characters$/m,
    );
    try {
      parseEnv(Schema, { CREDENTIALS_DIRECTORY: dir, DATABASE_URL: "postgres://u@h/db" });
    } catch (e) {
      expect((e as Error).message).not.toContain("short-secret");
    }
  });

  test("refused: a setting both in the environment and as a credential; a URL with a password beside DATABASE_PASSWORD; an unreadable credential", () => {
    const dir = credentials({ API_KEY_PEPPER: PEPPER, DATABASE_PASSWORD: "pw" });
    const both = () =>
      withCredentials({ CREDENTIALS_DIRECTORY: dir, API_KEY_PEPPER: PEPPER, DATABASE_URL: "postgres://u:old@h/db" });
    expect(both).toThrow(ConfigError);
    try {
      both();
    } catch (e) {
      expect((e as ConfigError).fields).toEqual(["API_KEY_PEPPER", "DATABASE_PASSWORD"]);
      expect((e as Error).message).not.toContain(PEPPER);
      expect((e as Error).message).not.toContain("old");
    }
    if (process.getuid?.() !== 0) {
      chmodSync(join(dir, "API_KEY_PEPPER"), 0o000);
      expect(() => withCredentials({ CREDENTIALS_DIRECTORY: dir })).toThrow(/API_KEY_PEPPER: its credential/);
    }
    const missing = join(dir, "nope");
    expect(() => withCredentials({ CREDENTIALS_DIRECTORY: missing })).toThrow(/CREDENTIALS_DIRECTORY: cannot be read/);
    mkdirSync(join(dir, "sub"));
  });
});
