import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError } from "@pipeline/shared/config";
import { loadConfig } from "./config.ts";

const KEY_ONE = "key-one-0123456789abcdef0123456789";
const KEY_TWO = "key-two-0123456789abcdef0123456789";
// A dev process (PIPELINE_ENV=dev): the production rules have their own tests below.
const ok = { DATABASE_URL: "postgres://u@127.0.0.1:5/db", API_KEYS: `${KEY_ONE},${KEY_TWO}`, PIPELINE_ENV: "dev" };

test("defaults apply and API_KEYS is a list", () => {
  const c = loadConfig(ok);
  expect(c.GATEWAY_PORT).toBe(8080);
  expect(c.API_KEYS).toEqual([KEY_ONE, KEY_TWO]);
  expect(c.API_KEYS_ALLOW_SHORT).toBe(false);
  expect(c.GATEWAY_METRICS_PORT).toBeUndefined();
  expect(c.GATEWAY_METRICS_HOST).toBe("127.0.0.1");
  expect(c.REGION).toBe("local");
});

test("a bad variable is named in the error, its value is not echoed", () => {
  const run = () => loadConfig({ ...ok, GATEWAY_PORT: "http", API_KEYS: "abc", DATABASE_URL: "mysql://secret@x" });
  expect(run).toThrow(ConfigError);
  try {
    run();
  } catch (e) {
    const err = e as ConfigError;
    expect(err.fields.sort()).toEqual(
      ["API_KEYS", "DATABASE_URL", "GATEWAY_PORT"]
        .sort()
        .map((f) => (f === "API_KEYS" ? "API_KEYS.0" : f))
        .sort(),
    );
    expect(err.message).not.toContain("secret");
  }
});

test("a region must be one subject token", () => {
  expect(() => loadConfig({ ...ok, REGION: "eu.west" })).toThrow(/REGION/);
});

test("the callbackUrl policy is strict unless WEBHOOK_ALLOW_HTTP / WEBHOOK_ALLOW_PRIVATE are set", () => {
  expect(loadConfig(ok)).toMatchObject({ WEBHOOK_ALLOW_HTTP: false, WEBHOOK_ALLOW_PRIVATE: false });
  expect(loadConfig({ ...ok, WEBHOOK_ALLOW_HTTP: "1", WEBHOOK_ALLOW_PRIVATE: "true" })).toMatchObject({
    WEBHOOK_ALLOW_HTTP: true,
    WEBHOOK_ALLOW_PRIVATE: true,
  });
  expect(() => loadConfig({ ...ok, WEBHOOK_ALLOW_PRIVATE: "maybe" })).toThrow(/WEBHOOK_ALLOW_PRIVATE/);
});

test("API keys shorter than 32 characters are refused outside dev (naming API_KEYS and the key's position, never the key); API_KEYS_ALLOW_SHORT=1 lets dev keys through (issue 14.8)", () => {
  const short = "regions-client-key-0001";
  let err: ConfigError | undefined;
  try {
    loadConfig({ ...ok, API_KEYS: `${KEY_ONE},${short}`, GATEWAY_PORT: "http" });
  } catch (e) {
    err = e as ConfigError;
  }
  expect(err).toBeInstanceOf(ConfigError);
  // Both faults named in one start.
  expect(err!.fields.sort()).toEqual(["API_KEYS", "GATEWAY_PORT"]);
  expect(err!.message).toContain("key #2 has 23 characters: at least 32");
  expect(err!.message).not.toContain(short);
  expect(
    loadConfig({ ...ok, API_KEYS: "x".repeat(31) + "," + KEY_ONE, API_KEYS_ALLOW_SHORT: "1" }).API_KEYS,
  ).toHaveLength(2);
  expect(loadConfig({ ...ok, API_KEYS: "dev-key", API_KEYS_ALLOW_SHORT: "1" }).API_KEYS).toEqual(["dev-key"]);
  expect(loadConfig({ ...ok, API_KEYS: "x".repeat(32) }).API_KEYS).toHaveLength(1);
  expect(() => loadConfig({ ...ok, API_KEYS: "x".repeat(31) })).toThrow(/API_KEYS/);
  expect(() => loadConfig({ ...ok, API_KEYS_ALLOW_SHORT: "maybe" })).toThrow(/API_KEYS_ALLOW_SHORT/);
  // Without API_KEYS at all.
  const { API_KEYS: _, ...none } = ok;
  expect(() => loadConfig(none)).toThrow(/API_KEYS/);
});

test("the metrics listener is off unless GATEWAY_METRICS_PORT is set; 0 asks for a free port (issue 14.7)", () => {
  expect(loadConfig({ ...ok, GATEWAY_METRICS_PORT: "9466" }).GATEWAY_METRICS_PORT).toBe(9466);
  expect(loadConfig({ ...ok, GATEWAY_METRICS_PORT: "0" }).GATEWAY_METRICS_PORT).toBe(0);
  expect(() => loadConfig({ ...ok, GATEWAY_METRICS_PORT: "70000" })).toThrow(/GATEWAY_METRICS_PORT/);
});

test("QUOTAS and TASK_PRICES are JSON checked field by field; a dailySpend needs TASK_PRICES (issue 14.6)", () => {
  const fields = (env: Record<string, string>) => {
    try {
      loadConfig({ ...ok, ...env });
      return [];
    } catch (e) {
      return (e as ConfigError).fields;
    }
  };
  expect(loadConfig(ok).QUOTAS).toBeUndefined();
  expect(fields({ QUOTAS: "{nope" })).toEqual(["QUOTAS"]);
  expect(fields({ QUOTAS: JSON.stringify({ default: { maxInFlight: -1 } }) })).toEqual(["QUOTAS.default.maxInFlight"]);
  expect(fields({ QUOTAS: JSON.stringify({ keys: { "0123456789abcdef": { dailySpend: "a" } } }) })).toEqual([
    "QUOTAS.keys.0123456789abcdef.dailySpend",
  ]);
  expect(fields({ QUOTAS: JSON.stringify({ default: { dailySpend: 5 } }) })).toEqual(["TASK_PRICES"]);
  expect(fields({ TASK_PRICES: JSON.stringify({ hcaptcha: 1 }) })).toEqual(["TASK_PRICES"]);
  const c = loadConfig({
    ...ok,
    QUOTAS: JSON.stringify({
      default: { dailySpend: 5, maxInFlight: 100 },
      keys: { "0123456789abcdef": { highLane: false } },
    }),
    TASK_PRICES: JSON.stringify({ turnstile: 0.0015 }),
  });
  expect(c.QUOTAS).toEqual({
    default: { dailySpend: 5, maxInFlight: 100 },
    keys: { "0123456789abcdef": { highLane: false } },
  });
  expect(c.TASK_PRICES).toEqual({ turnstile: 0.0015 });
  expect(c.QUOTA_REFRESH_MS).toBe(2000);
});

test("API_KEY_PEPPER: a secret of at least 32 characters, named (never echoed) when short; the removed API_KEY_LEGACY_IDS is refused; QUOTAS takes peppered ids (issue 14.8)", () => {
  const fields = (env: Record<string, string>) => {
    try {
      loadConfig({ ...ok, ...env });
      return [];
    } catch (e) {
      expect((e as ConfigError).message).not.toContain("short-pepper");
      return (e as ConfigError).fields;
    }
  };
  const pepper = "p".repeat(32);
  expect(loadConfig(ok).API_KEY_PEPPER).toBeUndefined();
  expect(loadConfig({ ...ok, API_KEY_PEPPER: pepper }).API_KEY_PEPPER).toBe(pepper);
  expect(fields({ API_KEY_PEPPER: "short-pepper" })).toEqual(["API_KEY_PEPPER"]);
  // Removed: set at all (even to 0), it is refused by name, with or without a pepper.
  for (const v of ["1", "0", ""]) {
    expect(fields({ API_KEY_LEGACY_IDS: v })).toEqual(["API_KEY_LEGACY_IDS"]);
    expect(fields({ API_KEY_PEPPER: pepper, API_KEY_LEGACY_IDS: v })).toEqual(["API_KEY_LEGACY_IDS"]);
  }
  expect(() => loadConfig({ ...ok, API_KEY_PEPPER: pepper, API_KEY_LEGACY_IDS: "1" })).toThrow(/removed/);
  // Both faults in one start.
  expect(fields({ API_KEY_PEPPER: "short-pepper", GATEWAY_PORT: "http" }).sort()).toEqual([
    "API_KEY_PEPPER",
    "GATEWAY_PORT",
  ]);
  // QUOTAS names keys by the ids in use: an unpeppered id only without a pepper.
  const [id, unpeppered] = ["0123456789abcdef0123456789abcdef", "0123456789abcdef"];
  const quotas = (...ids: string[]) =>
    JSON.stringify({ keys: Object.fromEntries(ids.map((k) => [k, { maxInFlight: 1 }])) });
  expect(loadConfig({ ...ok, API_KEY_PEPPER: pepper, QUOTAS: quotas(id) }).QUOTAS?.keys[id]).toEqual({
    maxInFlight: 1,
  });
  expect(loadConfig({ ...ok, QUOTAS: quotas(unpeppered) }).QUOTAS?.keys[unpeppered]).toEqual({ maxInFlight: 1 });
  expect(fields({ API_KEY_PEPPER: pepper, QUOTAS: quotas(id, unpeppered) })).toEqual([`QUOTAS.keys.${unpeppered}`]);
  expect(fields({ QUOTAS: quotas(id) })).toEqual([`QUOTAS.keys.${id}`]);
  expect(fields({ QUOTAS: JSON.stringify({ keys: { "0123456789abcdef0": {} } }) })).toEqual([
    "QUOTAS.keys.0123456789abcdef0",
  ]);
});

describe("production (PIPELINE_ENV unset) refuses what is only safe on one machine", () => {
  const PEPPER = "p".repeat(40);
  const prod = { DATABASE_URL: "postgres://u@127.0.0.1:5/db", API_KEYS: KEY_ONE, API_KEY_PEPPER: PEPPER };
  const fieldsOf = (env: Record<string, string>) => {
    try {
      loadConfig(env);
      return [];
    } catch (e) {
      return (e as ConfigError).fields;
    }
  };

  test("PIPELINE_ENV defaults to production and takes only production or dev", () => {
    expect(loadConfig(prod).PIPELINE_ENV).toBe("production");
    expect(fieldsOf({ ...prod, PIPELINE_ENV: "staging" })).toEqual(["PIPELINE_ENV"]);
  });

  test("behind a load balancer it does not know (GATEWAY_BEHIND_PROXY without GATEWAY_TRUSTED_PROXIES) the gateway refuses to start", () => {
    expect(fieldsOf({ ...prod, GATEWAY_BEHIND_PROXY: "1" })).toEqual(["GATEWAY_TRUSTED_PROXIES"]);
    const c = loadConfig({
      ...prod,
      GATEWAY_BEHIND_PROXY: "1",
      GATEWAY_TRUSTED_PROXIES: "10.0.1.5, 10.0.2.0/24,fd00::/8",
    });
    expect(c.GATEWAY_TRUSTED_PROXIES.map((r) => r.text)).toEqual(["10.0.1.5", "10.0.2.0/24", "fd00::/8"]);
    // A dev stack may leave it out.
    expect(fieldsOf({ ...prod, GATEWAY_BEHIND_PROXY: "1", PIPELINE_ENV: "dev" })).toEqual([]);
  });

  test("a bad proxy entry is named with its position; the old GATEWAY_TRUST_PROXY is refused with what replaces it", () => {
    let err: ConfigError | undefined;
    try {
      loadConfig({ ...prod, GATEWAY_TRUSTED_PROXIES: "10.0.1.5,lb.internal,10.0.0.0/33", GATEWAY_TRUST_PROXY: "1" });
    } catch (e) {
      err = e as ConfigError;
    }
    expect(err?.fields.sort()).toEqual(["GATEWAY_TRUSTED_PROXIES.1", "GATEWAY_TRUSTED_PROXIES.2"]);
    expect(fieldsOf({ ...prod, GATEWAY_TRUST_PROXY: "1" })).toEqual(["GATEWAY_TRUST_PROXY"]);
    expect(() => loadConfig({ ...prod, GATEWAY_TRUST_PROXY: "1" })).toThrow(/GATEWAY_TRUSTED_PROXIES/);
  });

  test("API_KEY_PEPPER is required outside dev", () => {
    const { API_KEY_PEPPER: _, ...unpeppered } = prod;
    expect(fieldsOf(unpeppered)).toEqual(["API_KEY_PEPPER"]);
    expect(fieldsOf({ ...unpeppered, PIPELINE_ENV: "dev" })).toEqual([]);
  });

  test("the published dev webhook secrets are refused outside dev, without echoing them", () => {
    expect(fieldsOf({ ...prod, WEBHOOK_SECRET: "dev-webhook-secret-0001" })).toEqual(["WEBHOOK_SECRET"]);
    expect(
      fieldsOf({ ...prod, WEBHOOK_SECRET: "x".repeat(32), WEBHOOK_SECRET_PREVIOUS: "e2e-webhook-secret-0001" }),
    ).toEqual(["WEBHOOK_SECRET_PREVIOUS"]);
    expect(() => loadConfig({ ...prod, WEBHOOK_SECRET: "regions-webhook-secret" })).not.toThrow(
      /regions-webhook-secret/,
    );
    expect(fieldsOf({ ...prod, WEBHOOK_SECRET: "dev-webhook-secret-0001", PIPELINE_ENV: "dev" })).toEqual([]);
  });

  test("WEBHOOK_CLIENT_GENERATIONS is parsed, each entry checked", () => {
    const id = "0123456789abcdef0123456789abcdef";
    expect(
      loadConfig({ ...prod, WEBHOOK_CLIENT_GENERATIONS: JSON.stringify({ [id]: { current: 2, previous: 1 } }) })
        .WEBHOOK_CLIENT_GENERATIONS,
    ).toEqual({ [id]: { current: 2, previous: 1 } });
    expect(
      fieldsOf({ ...prod, WEBHOOK_CLIENT_GENERATIONS: JSON.stringify({ [id]: { current: 1, previous: 1 } }) })[0],
    ).toStartWith("WEBHOOK_CLIENT_GENERATIONS");
    expect(fieldsOf({ ...prod, WEBHOOK_CLIENT_GENERATIONS: "{" })).toEqual(["WEBHOOK_CLIENT_GENERATIONS"]);
  });
});

test("in production its secrets come as systemd credentials: keys, pepper, webhook secret, the database password; a missing one is named with where it was looked for", () => {
  const dir = mkdtempSync(join(tmpdir(), "gateway-creds-"));
  try {
    const pepper = "pepper-0123456789abcdef0123456789abcdef";
    writeFileSync(join(dir, "API_KEYS"), `${KEY_ONE}\n`);
    writeFileSync(join(dir, "WEBHOOK_SECRET"), "webhook-master-0123456789abcdef\n");
    writeFileSync(join(dir, "WEBHOOK_SECRET_PREVIOUS"), "");
    writeFileSync(join(dir, "DATABASE_PASSWORD"), "db-password-0123\n");
    const env = { DATABASE_URL: "postgres://pipeline_gateway@10.0.1.30:5432/pipeline", CREDENTIALS_DIRECTORY: dir };
    let err: ConfigError | undefined;
    try {
      loadConfig(env);
    } catch (e) {
      err = e as ConfigError;
    }
    expect(err?.fields).toEqual(["API_KEY_PEPPER"]);
    expect(err?.message).toContain(`(not in the environment, and no credential API_KEY_PEPPER in ${dir})`);
    writeFileSync(join(dir, "API_KEY_PEPPER"), `${pepper}\n`);
    const c = loadConfig(env);
    expect(c.PIPELINE_ENV).toBe("production");
    expect(c.API_KEYS).toEqual([KEY_ONE]);
    expect(c.API_KEY_PEPPER).toBe(pepper);
    expect(c.WEBHOOK_SECRET).toBe("webhook-master-0123456789abcdef");
    expect(c.WEBHOOK_SECRET_PREVIOUS).toBeUndefined();
    expect(c.DATABASE_URL).toBe("postgres://pipeline_gateway:db-password-0123@10.0.1.30:5432/pipeline");
    // The same secret in an env file too is refused, named, its value not shown.
    expect(() => loadConfig({ ...env, API_KEY_PEPPER: pepper })).toThrow(
      "API_KEY_PEPPER: set in the environment and as the credential API_KEY_PEPPER",
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
