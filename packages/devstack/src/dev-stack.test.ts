import { expect, test } from "bun:test";
import { chmodSync, mkdtempSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type DevStack, devStackEnv, readDevStack, writeDevStack, writePgCredentials } from "./dev-stack.ts";

const dir = mkdtempSync(join(tmpdir(), "dev-stack-"));
const credentials = join(dir, "credentials.json");
writeFileSync(
  credentials,
  JSON.stringify({
    gateway: { user: "gateway", password: "gw-secret" },
    solver: { user: "solver", password: "sv-secret" },
  }),
);
chmodSync(credentials, 0o600);
const stack: DevStack = {
  pid: process.pid,
  startedAt: "now",
  natsUrl: "nats://127.0.0.1:1",
  natsVersion: "2.15.1",
  natsCredentials: credentials,
  databaseUrl: "postgres://x@127.0.0.1:2/p",
  env: { API_KEYS: "dev-key", GATEWAY_PORT: "8080" },
};

test("the environment wins over the stack's defaults, and the role's NATS user is added", () => {
  const env = devStackEnv(stack, "gateway", { GATEWAY_PORT: "9999" });
  expect(env).toEqual({
    API_KEYS: "dev-key",
    NATS_URL: "nats://127.0.0.1:1",
    DATABASE_URL: "postgres://x@127.0.0.1:2/p",
    NATS_USER: "gateway",
    NATS_PASSWORD: "gw-secret",
  });
});

test("credentials of the environment's own are never mixed with the stack's", () => {
  const env = devStackEnv(stack, "solver", { NATS_CREDS: "/etc/solver.creds" });
  expect(env.NATS_USER).toBeUndefined();
  expect(env.NATS_PASSWORD).toBeUndefined();
});

test("a settings file whose process is gone is stale; the file itself holds no password", async () => {
  const file = join(dir, "dev-stack.json");
  writeDevStack(file, stack);
  expect(readDevStack(file)?.natsUrl).toBe("nats://127.0.0.1:1");
  expect(await Bun.file(file).text()).not.toContain("gw-secret");
  writeDevStack(file, { ...stack, pid: 2 ** 22 + 12345 });
  expect(readDevStack(file)).toBeUndefined();
});

test("with the stack's own Postgres each app gets its own login from the 0600 logins file; the settings file holds none", async () => {
  const pgCredentials = join(dir, "pg-credentials.json");
  writePgCredentials(pgCredentials, {
    owner: { user: "postgres", password: "owner-secret" },
    gateway: { user: "dev_gateway_login", password: "gw-db-secret" },
    solver: { user: "dev_solver_login", password: "sv-db-secret" },
    rollout: { user: "dev_rollout_login", password: "ro-db-secret" },
  });
  expect(statSync(pgCredentials).mode & 0o777).toBe(0o600);
  const { natsCredentials: _, ...noNats } = stack;
  const own: DevStack = { ...noNats, databaseUrl: "postgres://postgres@127.0.0.1:2/pipeline", pgCredentials };
  expect(devStackEnv(own, "gateway", {}).DATABASE_URL).toBe(
    "postgres://dev_gateway_login:gw-db-secret@127.0.0.1:2/pipeline",
  );
  expect(devStackEnv(own, "solver", {}).DATABASE_URL).toBe(
    "postgres://dev_solver_login:sv-db-secret@127.0.0.1:2/pipeline",
  );
  expect(devStackEnv(own, "rollout", {}).DATABASE_URL).toBe(
    "postgres://dev_rollout_login:ro-db-secret@127.0.0.1:2/pipeline",
  );
  expect(devStackEnv(own, "recovery", {}).DATABASE_URL).toBe("postgres://postgres:owner-secret@127.0.0.1:2/pipeline");
  expect(devStackEnv(own, undefined, {}).DATABASE_URL).toBe("postgres://postgres@127.0.0.1:2/pipeline");
  // The environment's own DATABASE_URL wins.
  expect(devStackEnv(own, "gateway", { DATABASE_URL: "postgres://mine@h/db" }).DATABASE_URL).toBeUndefined();
  const file = join(dir, "dev-stack-pg.json");
  writeDevStack(file, own);
  for (const secret of ["owner-secret", "gw-db-secret", "sv-db-secret", "ro-db-secret"])
    expect(await Bun.file(file).text()).not.toContain(secret);
});
