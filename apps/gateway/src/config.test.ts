import { expect, test } from "bun:test";
import { ConfigError } from "@pipeline/shared/config";
import { loadConfig } from "./config.ts";

const ok = { DATABASE_URL: "postgres://u@127.0.0.1:5/db", API_KEYS: "key-one,key-two" };

test("defaults apply and API_KEYS is a list", () => {
  const c = loadConfig(ok);
  expect(c.GATEWAY_PORT).toBe(8080);
  expect(c.API_KEYS).toEqual(["key-one", "key-two"]);
  expect(c.REGION).toBe("local");
});

test("a bad variable is named in the error, its value is not echoed", () => {
  const run = () => loadConfig({ ...ok, GATEWAY_PORT: "http", API_KEYS: "abc", DATABASE_URL: "mysql://secret@x" });
  expect(run).toThrow(ConfigError);
  try {
    run();
  } catch (e) {
    const err = e as ConfigError;
    expect(err.fields.sort()).toEqual(["API_KEYS", "DATABASE_URL", "GATEWAY_PORT"].sort().map((f) => (f === "API_KEYS" ? "API_KEYS.0" : f)).sort());
    expect(err.message).not.toContain("secret");
  }
});

test("a region must be one subject token", () => {
  expect(() => loadConfig({ ...ok, REGION: "eu.west" })).toThrow(/REGION/);
});

test("the callbackUrl policy is strict unless WEBHOOK_ALLOW_HTTP / WEBHOOK_ALLOW_PRIVATE are set", () => {
  expect(loadConfig(ok)).toMatchObject({ WEBHOOK_ALLOW_HTTP: false, WEBHOOK_ALLOW_PRIVATE: false });
  expect(loadConfig({ ...ok, WEBHOOK_ALLOW_HTTP: "1", WEBHOOK_ALLOW_PRIVATE: "true" })).toMatchObject({ WEBHOOK_ALLOW_HTTP: true, WEBHOOK_ALLOW_PRIVATE: true });
  expect(() => loadConfig({ ...ok, WEBHOOK_ALLOW_PRIVATE: "maybe" })).toThrow(/WEBHOOK_ALLOW_PRIVATE/);
});
