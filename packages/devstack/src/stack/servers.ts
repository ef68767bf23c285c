// Where a stack's servers come from: NATS servers and a database per region, and the ports of
// everything. `testServers` gives each stack fresh ones (temp stores, a database of its own on the
// tests' Postgres, free ports); `ownServers` is the dev stack's (stores under .data/, its own
// Postgres, fixed ports, reused by the next start).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type AppRole, createAppLogins, migrateDatabase, openDatabase, urlWithLogin } from "@pipeline/shared/db";
import { freePort, portInUse } from "../free-port.ts";
import { type NatsServerHandle, type NatsServerOptions, startNatsServer } from "../nats-server.ts";
import { type PostgresHandle, startPostgres } from "../postgres.ts";
import { createTestDatabase } from "../testing/index.ts";

/** One nats-server of the stack: a region's (`name` = the region) or the witness (`witness`). */
export interface NatsSite {
  name: string;
  regions: string[];
  domain?: string;
  leafnodes?: NatsServerOptions["leafnodes"];
}

export interface StackDatabase {
  /** The owner's (admin's) URL. */
  url: string;
  name: string;
  appUrls: Record<AppRole, string>;
}

/** A port the stack needs: `nats:<site>`, `leaf`, `gateway:<region>`, `gateway-metrics:<region>`, `solver-metrics:<region>`. */
export type PortName = `${"nats" | "gateway" | "gateway-metrics" | "solver-metrics"}:${string}` | "leaf";

export interface ServerSource {
  nats(site: NatsSite): Promise<NatsServerHandle>;
  database(region: string): Promise<StackDatabase>;
  /** A port for `what` (undefined: let the app pick, where it can). */
  port(what: PortName): Promise<number | undefined>;
  /** Drops what `database` made and stops what this source started. */
  stop(): Promise<void>;
}

/** Fresh servers per stack: a temp store per nats-server, a database per region on the tests' Postgres. */
export function testServers(o: { pgAdminUrl?: string; dbPrefix?: (region: string) => string } = {}): ServerSource {
  const drops: Array<() => Promise<void>> = [];
  return {
    async nats(site) {
      const dir = mkdtempSync(join(tmpdir(), `nats-${site.name}-`));
      // The store outlives a stop (a test stops and starts a server again): removed with the source.
      drops.push(async () => rmSync(dir, { recursive: true, force: true }));
      return startNatsServer({
        port: await freePort(),
        storeDir: dir,
        name: `${site.name}-1`,
        regions: site.regions,
        ...(site.domain ? { domain: site.domain } : {}),
        ...(site.leafnodes ? { leafnodes: site.leafnodes } : {}),
      });
    },
    async database(region) {
      const tdb = await createTestDatabase(o.dbPrefix?.(region) ?? `reg_${region}`, o.pgAdminUrl);
      drops.push(() => tdb.drop());
      return tdb;
    },
    port: (what) => (what.startsWith("solver-metrics:") ? Promise.resolve(0) : freePort()),
    async stop() {
      await Promise.all(drops.map((d) => d()));
    },
  };
}

export interface OwnServerOptions {
  /** Stores and the Postgres cluster live here; a second start reuses them. */
  dataDir: string;
  /** Fixed ports (dev): a taken one fails the start naming the setting. */
  ports: Partial<Record<PortName, number>>;
  /** The setting to name when a port is taken (`NATS_PORT`...). */
  portSetting: (what: PortName) => string;
  pgPort: number;
  /** A nats-server's store (default `<dataDir>/<site>/nats`). */
  natsStore?: (site: string) => string;
  /** Database name of a region (default `pipeline_<region>`). */
  databaseName?: (region: string) => string;
  log?: (m: string) => void;
}

/** The dev stack's servers: persisted under `dataDir`, fixed ports, one Postgres cluster of its own. */
export function ownServers(o: OwnServerOptions): ServerSource & { postgres(): Promise<PostgresHandle> } {
  let pg: Promise<PostgresHandle> | undefined;
  let logins: Promise<Awaited<ReturnType<typeof createAppLogins>>> | undefined;
  const stops: Array<() => Promise<void>> = [];
  const postgres = () => {
    pg ??= startPostgres({ dataDir: join(o.dataDir, "pg"), port: o.pgPort, ...(o.log ? { log: o.log } : {}) }).then(
      (h) => {
        stops.push(() => h.stop());
        return h;
      },
    );
    return pg;
  };
  const port = async (what: PortName) => {
    const p = o.ports[what];
    if (p === undefined) return undefined;
    if (await portInUse(p))
      throw new Error(`port ${p} is taken; is another dev stack running? Set ${o.portSetting(what)}`);
    return p;
  };
  return {
    postgres,
    async nats(site) {
      return startNatsServer({
        port: (await port(`nats:${site.name}`)) ?? (await freePort()),
        storeDir: o.natsStore?.(site.name) ?? join(o.dataDir, site.name, "nats"),
        name: `${site.name}-1`,
        regions: site.regions,
        ...(site.domain ? { domain: site.domain } : {}),
        ...(site.leafnodes ? { leafnodes: site.leafnodes } : {}),
        ...(o.log ? { log: o.log } : {}),
      });
    },
    async database(region) {
      const server = await postgres();
      const name = o.databaseName?.(region) ?? `pipeline_${region}`;
      await server.ensureDatabase(name);
      const url = server.urlFor(name);
      await migrateDatabase(url);
      // Each app its own login, a member of its role (packages/shared/src/db/roles.ts), fresh
      // passwords at every start; the recovery service is the owner (the admin).
      logins ??= (async () => {
        const admin = openDatabase(server.adminUrl, { max: 1, appName: "dev-stack" });
        return createAppLogins(admin.sql, "dev").finally(() => admin.close());
      })();
      const l = await logins;
      return {
        url,
        name,
        appUrls: {
          gateway: urlWithLogin(url, l.gateway),
          solver: urlWithLogin(url, l.solver),
          rollout: urlWithLogin(url, l.rollout),
        },
      };
    },
    port,
    /** Stops the Postgres cluster (the stack stops the nats-servers it started). */
    async stop() {
      for (const s of stops.reverse()) await s().catch(() => {});
    },
  };
}
