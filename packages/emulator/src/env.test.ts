import { describe, expect, test } from "bun:test";
import { loadEmulatorEnv, loadSecondEmulatorEnv } from "./env.ts";
import { EmulatorConfigError } from "./settings.ts";

function errorOf(fn: () => unknown): EmulatorConfigError {
  try {
    fn();
  } catch (err) {
    if (err instanceof EmulatorConfigError) return err;
    throw err;
  }
  throw new Error("expected an EmulatorConfigError");
}

describe("loadEmulatorEnv", () => {
  test("defaults: 127.0.0.1:18090, emulator-key with 50 threads, 2000 ms latency", () => {
    expect(loadEmulatorEnv({})).toEqual({
      host: "127.0.0.1",
      port: 18090,
      keys: { "emulator-key": { threads: 50 } },
      latencyMs: 2000,
      latencyJitterMs: 0,
      maxImageBytes: 100 * 1024,
    });
  });

  test("EMULATOR_KEYS takes key:threads[:balance] entries, comma-separated", () => {
    const opts = loadEmulatorEnv({
      EMULATOR_KEYS: "alpha:5, beta:2:12.5",
      EMULATOR_PORT: "0",
      EMULATOR_LATENCY_MS: "50",
    });
    expect(opts.keys).toEqual({ alpha: { threads: 5 }, beta: { threads: 2, balance: 12.5 } });
    expect(opts.port).toBe(0);
    expect(opts.latencyMs).toBe(50);
  });

  test("a bad value is reported by variable name", () => {
    expect(errorOf(() => loadEmulatorEnv({ EMULATOR_PORT: "http" })).fields).toEqual(["EMULATOR_PORT"]);
    expect(errorOf(() => loadEmulatorEnv({ EMULATOR_LATENCY_MS: "-1" })).message).toContain("EMULATOR_LATENCY_MS");
  });

  test("a malformed EMULATOR_KEYS names the variable but never echoes the key", () => {
    const err = errorOf(() => loadEmulatorEnv({ EMULATOR_KEYS: "supersecretkey" }));
    expect(err.fields).toEqual(["EMULATOR_KEYS"]);
    expect(err.message).toContain("EMULATOR_KEYS");
    expect(err.message).not.toContain("supersecretkey");
  });
});

test("a second provider: none without EMULATOR_B_PORT; its keys, speed and prices; bad prices name the variable", () => {
  expect(loadSecondEmulatorEnv({})).toBeUndefined();
  expect(loadSecondEmulatorEnv({ EMULATOR_B_PORT: "18091", EMULATOR_B_PRICES: '{"turnstile":0.003}' })).toMatchObject({
    port: 18091,
    keys: { "emulator-key-b": { threads: 200 } },
    latencyMs: 4000,
    prices: { turnstile: 0.003 },
  });
  expect(() => loadSecondEmulatorEnv({ EMULATOR_B_PORT: "18091", EMULATOR_B_PRICES: '{"turnstyle":1}' })).toThrow(
    /EMULATOR_B_PRICES/,
  );
});
