import { expect, test } from "bun:test";
import { join } from "node:path";

// The gateway as a process, started the way an operator would, without the test runner's dev escape.
function start(env: Record<string, string>) {
  const base: Record<string, string> = {};
  for (const k of ["PATH", "HOME"]) if (process.env[k]) base[k] = process.env[k]!;
  const r = Bun.spawnSync([process.execPath, join(import.meta.dir, "main.ts")], {
    env: { ...base, DATABASE_URL: "postgres://u@127.0.0.1:1/db", ...env },
    timeout: 20_000,
  });
  return { code: r.exitCode, out: `${r.stdout.toString()}${r.stderr.toString()}` };
}

test("the gateway refuses to start without API_KEYS, naming the variable", () => {
  const r = start({});
  expect(r.code).not.toBe(0);
  expect(r.out).toContain("API_KEYS");
});

test("the gateway refuses to start with a key under 32 characters (outside dev), naming API_KEYS and never the key (issue 14.8)", () => {
  const short = "regions-client-key-0001";
  const r = start({ API_KEYS: `${"k".repeat(40)},${short}` });
  expect(r.code).not.toBe(0);
  expect(r.out).toContain("API_KEYS: key #2 has 23 characters: at least 32");
  expect(r.out).not.toContain(short);
});

test("outside dev, the gateway refuses to start behind a load balancer it does not know (GATEWAY_BEHIND_PROXY without GATEWAY_TRUSTED_PROXIES), naming the setting", () => {
  const r = start({ API_KEYS: "k".repeat(40), API_KEY_PEPPER: "p".repeat(40), GATEWAY_BEHIND_PROXY: "1" });
  expect(r.code).not.toBe(0);
  expect(r.out).toContain("GATEWAY_TRUSTED_PROXIES: required with GATEWAY_BEHIND_PROXY");
  const unpeppered = start({ API_KEYS: "k".repeat(40) });
  expect(unpeppered.code).not.toBe(0);
  expect(unpeppered.out).toContain("API_KEY_PEPPER: required outside dev");
});
