import { expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError } from "@pipeline/shared/config";
import { loadConfig, regionEndpoints } from "./config.ts";

const base = {
  NATS_URL: "nats://127.0.0.1:4222",
  REGION: "fsn1",
  REGIONS: "fsn1,hel1",
  DATABASE_URL: "postgres://a@127.0.0.1/x",
};

test("each other region is reached through its own suffixed variables", () => {
  const env = {
    ...base,
    NATS_URL_HEL1: "nats://10.0.0.2:4222",
    DATABASE_URL_HEL1: "postgres://b@10.0.0.2/x",
    NATS_USER_HEL1: "rollout",
    NATS_PASSWORD_HEL1: "pw",
  };
  const e = regionEndpoints(loadConfig(env), env, { needDatabase: true });
  expect(e.map((r) => [r.name, r.natsUrl, r.databaseUrl])).toEqual([
    ["fsn1", "nats://127.0.0.1:4222", "postgres://a@127.0.0.1/x"],
    ["hel1", "nats://10.0.0.2:4222", "postgres://b@10.0.0.2/x"],
  ]);
  expect(e[1]!.auth).toEqual({ user: "rollout", pass: "pw" });
});

test("a missing or malformed region variable is named, its value never shown", () => {
  const env = { ...base, DATABASE_URL_HEL1: "mysql://secret@x" };
  let err: unknown;
  try {
    regionEndpoints(loadConfig(env), env, { needDatabase: true });
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(ConfigError);
  expect((err as ConfigError).fields.sort()).toEqual(["DATABASE_URL_HEL1", "NATS_URL_HEL1"]);
  expect((err as Error).message).toContain("required for region hel1");
  expect((err as Error).message).not.toContain("secret");
});

test("the service needs the home database; the CLI does not", () => {
  const env = { NATS_URL: "nats://127.0.0.1:4222", REGION: "local" };
  expect(regionEndpoints(loadConfig(env), env, { needDatabase: false })).toHaveLength(1);
  expect(() => regionEndpoints(loadConfig(env), env, { needDatabase: true })).toThrow("DATABASE_URL");
  expect(() => loadConfig({ ...env, ROLLOUT_TICK_MS: "5" })).toThrow("ROLLOUT_TICK_MS");
});

test("under systemd the passwords are credentials: the home region's and the other regions'", () => {
  const dir = mkdtempSync(join(tmpdir(), "rollout-creds-"));
  try {
    // As systemd lays them out for LoadCredential=rollout:<folder> (and a bare name, as systemd-run may).
    writeFileSync(join(dir, "NATS_PASSWORD"), "home-nats-pw\n");
    writeFileSync(join(dir, "rollout_DATABASE_PASSWORD"), "home-db-pw\n");
    writeFileSync(join(dir, "rollout_NATS_PASSWORD_HEL1"), "hel1-nats-pw\n");
    writeFileSync(join(dir, "rollout_DATABASE_PASSWORD_HEL1"), "hel1-db-pw\n");
    const env = {
      ...base,
      CREDENTIALS_DIRECTORY: dir,
      NATS_USER: "rollout",
      NATS_URL_HEL1: "nats://10.0.0.2:4222",
      DATABASE_URL_HEL1: "postgres://b@10.0.0.2/x",
      NATS_USER_HEL1: "rollout",
    };
    const config = loadConfig(env);
    expect(config.DATABASE_URL).toBe("postgres://a:home-db-pw@127.0.0.1/x");
    const e = regionEndpoints(config, env, { needDatabase: true });
    expect(e.map((r) => [r.name, r.auth, r.databaseUrl])).toEqual([
      ["fsn1", { user: "rollout", pass: "home-nats-pw" }, "postgres://a:home-db-pw@127.0.0.1/x"],
      ["hel1", { user: "rollout", pass: "hel1-nats-pw" }, "postgres://b:hel1-db-pw@10.0.0.2/x"],
    ]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
