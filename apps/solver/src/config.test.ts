import { expect, test } from "bun:test";
import { loadConfig } from "./config.ts";

const ok = { DATABASE_URL: "postgres://u@127.0.0.1:5/db", PROVIDER_KEY: "k" };

test("defaults follow the protocol's limits", () => {
  const c = loadConfig(ok);
  expect(c.MAX_POLLS).toBe(20);
  expect(c.FIRST_POLL_MS).toBeUndefined();
  expect(c.PROVIDER_PROFILE).toBe("captchaai");
});

test("the poll budget cannot exceed 20 and the key is required; errors name the variable", () => {
  expect(() => loadConfig({ ...ok, MAX_POLLS: "50" })).toThrow(/MAX_POLLS/);
  expect(() => loadConfig({ DATABASE_URL: ok.DATABASE_URL })).toThrow(/PROVIDER_KEY/);
  expect(() => loadConfig({ ...ok, RETRY_BASE_MS: "5000", RETRY_MAX_MS: "100" })).toThrow(/RETRY_BASE_MS/);
  expect(() => loadConfig({ ...ok, PROVIDER_PROFILE: "anticaptcha" })).toThrow(/PROVIDER_PROFILE/);
});

test("callbacks: a strict SSRF policy and bounded retries by default; the dev flags parse as booleans", () => {
  const c = loadConfig(ok);
  expect(c).toMatchObject({
    WEBHOOK_ALLOW_HTTP: false,
    WEBHOOK_ALLOW_PRIVATE: false,
    WEBHOOK_TENANT_MAX_IN_FLIGHT: 10,
    WEBHOOK_MAX_ATTEMPTS: 30,
    WEBHOOK_MAX_AGE_MS: 86_400_000,
  });
  expect(loadConfig({ ...ok, WEBHOOK_ALLOW_HTTP: "1", WEBHOOK_ALLOW_PRIVATE: "yes" })).toMatchObject({
    WEBHOOK_ALLOW_HTTP: true,
    WEBHOOK_ALLOW_PRIVATE: true,
  });
  expect(() => loadConfig({ ...ok, WEBHOOK_ALLOW_PRIVATE: "on" })).toThrow(/WEBHOOK_ALLOW_PRIVATE/);
  expect(() => loadConfig({ ...ok, WEBHOOK_TENANT_MAX_IN_FLIGHT: "0" })).toThrow(/WEBHOOK_TENANT_MAX_IN_FLIGHT/);
  expect(() => loadConfig({ ...ok, WEBHOOK_RETRY_BASE_MS: "5000", WEBHOOK_RETRY_MAX_MS: "100" })).toThrow(
    /WEBHOOK_RETRY_BASE_MS/,
  );
});

test("the published dev webhook secrets are refused outside dev (PIPELINE_ENV=dev allows them); one client's generation parses", () => {
  expect(() => loadConfig({ ...ok, WEBHOOK_SECRET: "dev-webhook-secret-0001" })).toThrow(
    /WEBHOOK_SECRET: is a published dev secret/,
  );
  expect(() =>
    loadConfig({ ...ok, WEBHOOK_SECRET: "w".repeat(32), WEBHOOK_SECRET_PREVIOUS: "e2e-webhook-secret-0001" }),
  ).toThrow(/WEBHOOK_SECRET_PREVIOUS/);
  expect(loadConfig({ ...ok, WEBHOOK_SECRET: "dev-webhook-secret-0001", PIPELINE_ENV: "dev" }).WEBHOOK_SECRET).toBe(
    "dev-webhook-secret-0001",
  );
  const id = "0123456789abcdef";
  expect(
    loadConfig({ ...ok, WEBHOOK_CLIENT_GENERATIONS: JSON.stringify({ [id]: { current: 3 } }) })
      .WEBHOOK_CLIENT_GENERATIONS,
  ).toEqual({ [id]: { current: 3 } });
  expect(() =>
    loadConfig({ ...ok, WEBHOOK_CLIENT_GENERATIONS: JSON.stringify({ "not-an-id": { current: 3 } }) }),
  ).toThrow(/WEBHOOK_CLIENT_GENERATIONS/);
});

test("PROVIDERS: further accounts with their key read from the variable each names; errors name the field, never a key", () => {
  const accounts = [{ id: "b", url: "http://127.0.0.1:18091", keyEnv: "PROVIDER_KEY_B", prices: { turnstile: 0.003 } }];
  const c = loadConfig({ ...ok, PROVIDERS: JSON.stringify(accounts), PROVIDER_KEY_B: "secret-b" });
  expect(c.accounts).toEqual([{ ...accounts[0]!, priority: 1, key: "secret-b" }]);
  expect(loadConfig(ok).accounts).toEqual([]);
  const missing = () => loadConfig({ ...ok, PROVIDERS: JSON.stringify(accounts) });
  expect(missing).toThrow(/PROVIDERS\[0\]\.keyEnv: PROVIDER_KEY_B is not set/);
  expect(() => loadConfig({ ...ok, PROVIDERS: JSON.stringify([{ ...accounts[0], id: "default" }]) })).toThrow(
    /PROVIDERS/,
  );
  expect(() => loadConfig({ ...ok, PROVIDERS: JSON.stringify([accounts[0], accounts[0]]) })).toThrow(/unique/);
  expect(() => loadConfig({ ...ok, PROVIDERS: JSON.stringify([{ ...accounts[0], url: "nope" }]) })).toThrow(
    /PROVIDERS/,
  );
  try {
    loadConfig({ ...ok, PROVIDERS: JSON.stringify([{ ...accounts[0], threads: 0 }]), PROVIDER_KEY_B: "secret-b" });
  } catch (err) {
    expect((err as Error).message).not.toContain("secret-b");
  }
});

test("WORKER_ID: a name that fits a KV key and, with its incarnation, a Postgres application_name", () => {
  expect(loadConfig({ ...ok, WORKER_ID: "app-1.fsn1_v2" }).WORKER_ID).toBe("app-1.fsn1_v2");
  expect(() => loadConfig({ ...ok, WORKER_ID: "solver 1" })).toThrow(/WORKER_ID/);
  expect(() => loadConfig({ ...ok, WORKER_ID: "s".repeat(41) })).toThrow(/WORKER_ID/);
});

test("ADAPTIVE_CONCURRENCY: off by default, a boolean; anything else names the variable", () => {
  expect(loadConfig(ok).ADAPTIVE_CONCURRENCY).toBe(false);
  expect(loadConfig({ ...ok, ADAPTIVE_CONCURRENCY: "1" }).ADAPTIVE_CONCURRENCY).toBe(true);
  expect(() => loadConfig({ ...ok, ADAPTIVE_CONCURRENCY: "maybe" })).toThrow(/ADAPTIVE_CONCURRENCY/);
});
