import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type AppRole, createAppLogins, dropAppLogins, migrateDatabase, urlWithLogin } from "@pipeline/shared/db";
import { provisionRegionsAt } from "@pipeline/shared/provision";
import postgres from "postgres";
import { findPostgres } from "../binaries.ts";
import { freePort } from "../free-port.ts";
import { type NatsServerHandle, startNatsServer } from "../nats-server.ts";
import { startPostgres } from "../postgres.ts";

export interface TestNats extends NatsServerHandle {
  /** Stops the server and removes its store. */
  dispose(): Promise<void>;
}

/**
 * A real nats-server with JetStream and authentication on a free port and a fresh store, for one
 * test file; its users' permissions cover `regions` (default ["local"]). Connect with
 * `connectNats(nats.url, name, nats.auth("admin"))`. With `provision`, each region's topology is
 * created as the admin (@pipeline/shared/provision), as the recovery service does before the apps start:
 * the gateway and the solver may not create it themselves.
 */
export async function startTestNats(o: { regions?: string[]; provision?: boolean } = {}): Promise<TestNats> {
  const dir = mkdtempSync(join(tmpdir(), "pipeline-nats-"));
  const port = await freePort();
  const regions = o.regions ?? ["local"];
  const h = await startNatsServer({ port, storeDir: dir, regions });
  if (o.provision) await provisionRegionsAt(h.url, h.auth("admin"), regions);
  return {
    ...h,
    async dispose() {
      await h.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

let ownCluster: Promise<string> | undefined;

/**
 * Admin URL of the Postgres the tests use: TEST_PG_ADMIN_URL (set by the test runner), or a
 * cluster this process starts in a temp folder when run without the runner.
 */
export function testPostgresAdminUrl(): Promise<string> {
  const fromEnv = process.env.TEST_PG_ADMIN_URL;
  if (fromEnv) return Promise.resolve(fromEnv);
  ownCluster ??= (async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "pipeline-pg-"));
    const pg = await startPostgres({ dataDir, port: await freePort(), fast: true });
    // `bun test` exits without an "exit" event: a watchdog stops the cluster once this process is gone.
    const stop = `${process.getuid?.() === 0 ? "runuser -u postgres -- " : ""}'${findPostgres().pgCtl}' -D '${dataDir}' -m immediate stop`;
    spawn("sh", ["-c", `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; ${stop}; rm -rf '${dataDir}'`], {
      detached: true,
      stdio: "ignore",
    }).unref();
    return pg.adminUrl;
  })();
  return ownCluster;
}

export interface TestDatabase {
  /** The admin's URL (a superuser: the owner's part, migrations, restores, the test's own checks). */
  url: string;
  name: string;
  /**
   * Each app's own login for this database (`<name>_<app>_login`, a member of pipeline_<app>,
   * packages/shared/src/db/roles.ts): start the gateway, solver and rollout with these, so every
   * test that runs them runs them with their grants only.
   */
  appUrls: Record<AppRole, string>;
  /** Drops the database (terminating connections still open). */
  drop(): Promise<void>;
}

/** A fresh database with every migration applied (unless `migrate: false`), of its own for one test file. */
export async function createTestDatabase(
  prefix = "t",
  adminUrl?: string,
  opts: { migrate?: boolean } = {},
): Promise<TestDatabase> {
  const admin = adminUrl ?? (await testPostgresAdminUrl());
  const name = `${prefix}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`.toLowerCase();
  const sql = postgres(admin, { max: 1, onnotice: () => {} });
  let logins: Awaited<ReturnType<typeof createAppLogins>>;
  try {
    await sql.unsafe(`create database "${name}"`);
    logins = await createAppLogins(sql, name);
  } finally {
    await sql.end({ timeout: 5 });
  }
  const url = admin.replace(/\/[^/]*$/, `/${name}`);
  if (opts.migrate !== false) await migrateDatabase(url);
  return {
    url,
    name,
    appUrls: {
      gateway: urlWithLogin(url, logins.gateway),
      solver: urlWithLogin(url, logins.solver),
      rollout: urlWithLogin(url, logins.rollout),
    },
    async drop() {
      const s = postgres(admin, { max: 1, onnotice: () => {} });
      try {
        await s.unsafe(`drop database if exists "${name}" with (force)`);
        await dropAppLogins(s, name);
      } finally {
        await s.end({ timeout: 5 });
      }
    },
  };
}

/** Polls `check` until it returns a truthy value or the timeout passes. */
export async function eventually<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 10_000,
  everyMs = 50,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > until)
      throw new Error(`condition not met within ${timeoutMs} ms${last ? `: ${String(last)}` : ""}`);
    await Bun.sleep(everyMs);
  }
}
export { natsEnv } from "../nats-server.ts";
export { readTaskEvents, type StoredEvent } from "./events.ts";
export { PROVIDER_KEY, type Proc, ROOT, spawnApp, WEBHOOK_SECRET } from "./processes.ts";
export { SEED_CLIENTS, SEED_REGIONS, type SeedOptions, seedTasks } from "./seed-tasks.ts";

/** A task row's charge columns when the provider has charged nothing yet (fixtures of a whole `TaskRow`). */
export const NO_CHARGE = {
  chargeProviderTaskId: null,
  chargeProvider: null,
  chargeRegion: null,
  chargeSolverVersion: null,
  chargeMicros: null,
  chargePriceSource: null,
  chargedAt: null,
} as const;
