import { expect, test } from "bun:test";
import { parseSolverConfig } from "@pipeline/shared/kv";
import { keyRefOf } from "./key-ref.ts";
import { resolveRuntimeConfig } from "./runtime-config.ts";

const env = { pollIntervalMs: 5000, maxPolls: 20, maxResubmits: 3 };
const keys = { primary: "key-one-000000000001", spare: "key-two-000000000002" };
const base = { providerKey: "spare", changedBy: "ops", changedAt: "2026-12-02T10:00:00.000Z" };

test("a valid revision names a key of the file; unset fields keep the environment's values", () => {
  const r = resolveRuntimeConfig({ ...base, pollIntervalMs: 700 }, keys, env);
  expect(r).toEqual({
    ok: true,
    key: { name: "spare", ref: keyRefOf(keys.spare), value: keys.spare },
    timing: { pollIntervalMs: 700, maxPolls: 20, maxResubmits: 3 },
  });
});

test("a key name the file does not hold is refused, naming the field (and not the key)", () => {
  const r = resolveRuntimeConfig({ ...base, providerKey: "gone" }, keys, env);
  expect(r).toEqual({ ok: false, error: "providerKey: no key named 'gone' in this solver's key file" });
});

test("stored revisions: garbage, unknown fields and out-of-range values are errors naming the field", () => {
  expect(parseSolverConfig("{not json")).toEqual({ ok: false, error: "(document): not JSON" });
  const unknown = parseSolverConfig(JSON.stringify({ ...base, pollIntervall: 5 }));
  expect(unknown.ok).toBe(false);
  expect(!unknown.ok && unknown.error).toContain("pollIntervall");
  const range = parseSolverConfig(JSON.stringify({ ...base, maxPolls: 0 }));
  expect(!range.ok && range.error).toStartWith("maxPolls:");
  const noKey = parseSolverConfig(JSON.stringify({ changedBy: "ops", changedAt: base.changedAt }));
  expect(!noKey.ok && noKey.error).toStartWith("providerKey:");
  expect(parseSolverConfig(JSON.stringify(base))).toEqual({ ok: true, value: base });
});
