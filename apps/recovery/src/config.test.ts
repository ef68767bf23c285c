import { expect, test } from "bun:test";
import { ConfigError } from "@pipeline/shared/config";
import { loadConfig } from "./config.ts";

const base = { DATABASE_URL: "postgres://u@127.0.0.1:5432/db", REGION: "fsn1" };
const witness = { WITNESS_URL: "nats://127.0.0.1:4222" };

test("retention settings: defaults 1 h period, 1 h token grace, 7 and 30 days, batches of 1000; metrics off unless RECOVERY_METRICS_PORT is set", () => {
  const c = loadConfig(base);
  expect(c).toMatchObject({
    RETENTION_INTERVAL_MS: 3600_000,
    TOKEN_GRACE_MS: 3600_000,
    TASK_RETENTION_DAYS: 7,
    ROW_RETENTION_DAYS: 30,
    RETENTION_BATCH: 1000,
  });
  expect(c.RECOVERY_METRICS_PORT).toBeUndefined();
  expect(loadConfig({ ...base, RECOVERY_METRICS_PORT: "0" }).RECOVERY_METRICS_PORT).toBe(0);
  // The solver's METRICS_PORT (one environment under npm run dev) is not the recovery service's.
  expect(loadConfig({ ...base, METRICS_PORT: "9464" }).RECOVERY_METRICS_PORT).toBeUndefined();
});

test("ROW_RETENTION_DAYS below TASK_RETENTION_DAYS is refused, naming the variable", () => {
  expect(() => loadConfig({ ...base, TASK_RETENTION_DAYS: "10", ROW_RETENTION_DAYS: "5" })).toThrow(ConfigError);
  expect(() => loadConfig({ ...base, TASK_RETENTION_DAYS: "10", ROW_RETENTION_DAYS: "5" })).toThrow(
    "ROW_RETENTION_DAYS",
  );
  expect(() => loadConfig({ ...base, TASK_RETENTION_DAYS: "0" })).toThrow("TASK_RETENTION_DAYS");
});

test("off-host copies go to the first other region by default; none with one region or SNAPSHOT_OFFHOST=none; never this region", () => {
  expect(loadConfig(base).offHostDomain).toBeUndefined();
  expect(loadConfig({ ...base, REGIONS: "fsn1,hel1", ...witness }).offHostDomain).toBe("hel1");
  expect(loadConfig({ ...base, REGION: "hel1", REGIONS: "fsn1,hel1", ...witness }).offHostDomain).toBe("fsn1");
  expect(
    loadConfig({ ...base, REGIONS: "fsn1,hel1", ...witness, SNAPSHOT_OFFHOST: "none" }).offHostDomain,
  ).toBeUndefined();
  expect(loadConfig({ ...base, SNAPSHOT_OFFHOST: "nbg1" }).offHostDomain).toBe("nbg1");
  expect(() => loadConfig({ ...base, SNAPSHOT_OFFHOST: "fsn1" })).toThrow("SNAPSHOT_OFFHOST");
  expect(() => loadConfig({ ...base, SNAPSHOT_OFFHOST: "a.b" })).toThrow("SNAPSHOT_OFFHOST");
});

test("BODIES_MAX_AGE_MS: by default the longer of SNAPSHOT_INTERVAL_MS and SNAPSHOT_MAX_AGE_MS plus 6 h; refused when a snapshot could outlive it", () => {
  expect(loadConfig(base).bodiesMaxAgeMs).toBe(15 * 60_000 + 6 * 3600_000);
  expect(loadConfig({ ...base, SNAPSHOT_INTERVAL_MS: "3600000", SNAPSHOT_MAX_AGE_MS: "7200000" }).bodiesMaxAgeMs).toBe(
    8 * 3600_000,
  );
  expect(loadConfig({ ...base, BODIES_MAX_AGE_MS: "86400000" }).bodiesMaxAgeMs).toBe(86_400_000);
  expect(() => loadConfig({ ...base, BODIES_MAX_AGE_MS: "600000" })).toThrow("BODIES_MAX_AGE_MS");
});

test("console settings: host names default to the loopback names and CONSOLE_HOST (not a wildcard); bad names, modes and limits are refused", () => {
  expect(loadConfig(base).consoleHostNames).toEqual(["localhost", "127.0.0.1", "::1"]);
  expect(loadConfig({ ...base, CONSOLE_HOST: "0.0.0.0" }).consoleHostNames).toEqual(["localhost", "127.0.0.1", "::1"]);
  expect(
    loadConfig({ ...base, CONSOLE_HOST: "10.0.0.5", CONSOLE_HOST_NAMES: "Console.Internal, [fd00::1]" })
      .consoleHostNames,
  ).toEqual(["localhost", "127.0.0.1", "::1", "10.0.0.5", "console.internal", "fd00::1"]);
  expect(loadConfig(base)).toMatchObject({
    CONSOLE_COOKIE_SECURE: "auto",
    CONSOLE_SIGNIN_MAX_FAILURES: 10,
    CONSOLE_SIGNIN_WINDOW_MS: 300_000,
  });
  for (const names of ["console.internal:8090", "https://console.internal", "a b", "evil/x"])
    expect(() => loadConfig({ ...base, CONSOLE_HOST_NAMES: names })).toThrow("CONSOLE_HOST_NAMES");
  expect(() => loadConfig({ ...base, CONSOLE_COOKIE_SECURE: "never" })).toThrow("CONSOLE_COOKIE_SECURE");
  expect(() => loadConfig({ ...base, CONSOLE_SIGNIN_MAX_FAILURES: "0" })).toThrow("CONSOLE_SIGNIN_MAX_FAILURES");
});

test('lease timing: defaults TTL 20 s, margin 3 s, renewed every 1 s (docs/regions.md, "The witness\'s timings"); a margin of half the TTL or more is refused', () => {
  expect(loadConfig(base)).toMatchObject({ LEASE_TTL_MS: 20_000, LEASE_MARGIN_MS: 3000, LEASE_RENEW_MS: 1000 });
  expect(() => loadConfig({ ...base, LEASE_TTL_MS: "6000", LEASE_MARGIN_MS: "3000" })).toThrow("LEASE_MARGIN_MS");
});
