import { expect, test } from "bun:test";
import { createLogger } from "@pipeline/shared/log";
import { loadConfig } from "./config.ts";
import { logClientIds } from "./service.ts";

const KEY = "key-one-0123456789abcdef0123456789";
const PEPPER = "pepper-0123456789abcdef0123456789abcdef";
// Unpeppered ids exist only on dev processes now (outside dev API_KEY_PEPPER is required).
const base = { DATABASE_URL: "postgres://u@127.0.0.1:5/db", API_KEYS: KEY, PIPELINE_ENV: "dev" };
const logged = (env: Record<string, string>) => {
  const lines: string[] = [];
  logClientIds(
    loadConfig({ ...base, ...env }),
    createLogger("gateway-test", { level: "info", destination: { write: (l: string) => void lines.push(l) } }),
  );
  return lines.join("");
};

test("the gateway warns that client ids are unpeppered outside dev stacks and tests; never logs a key or the pepper (issue 14.8)", () => {
  expect(logged({})).toContain("client ids are unpeppered");
  expect(logged({ API_KEYS_ALLOW_SHORT: "1" })).toBe("");
  expect(logged({ API_KEY_PEPPER: PEPPER })).toBe("");
  for (const secret of [KEY, PEPPER]) expect(logged({})).not.toContain(secret);
});
