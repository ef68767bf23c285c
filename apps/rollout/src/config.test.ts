import { expect, test } from "bun:test";
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
