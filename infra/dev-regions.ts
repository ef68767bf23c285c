// `npm run dev -- --regions 2`: both regions and the witness on one machine (docs/regions.md).
// Each region has its own nats-server (its own JetStream domain; hel1's leafnode connects to
// fsn1's), its own database, gateway, solver and recovery service (replicator and lease keeper);
// a witness nats-server holds the region leases; one emulator is the provider of both. The two
// databases live on one Postgres server of the stack's own (separate servers buy nothing on one
// machine). Data under <DATA_DIR>/regions, reused by the next start; Ctrl-C stops everything.
// Ports: GATEWAY_PORT (8080) and the next one for the second region, NATS_PORT (14222) and the
// next two for the second region and the witness, LEAF_PORT (17422), PG_PORT (15432),
// EMULATOR_PORT (18090), METRICS_PORT (9464, the solvers': this one and the next).
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import {
  type NatsServerHandle,
  natsEnv,
  portInUse,
  redactPassword,
  startNatsServer,
  startPostgres,
  waitForPort,
} from "@pipeline/devstack";
import { createAppLogins, migrateDatabase, openDatabase, urlWithLogin } from "@pipeline/shared/db";
import { provisionRegionsAt } from "@pipeline/shared/provision";

const root = join(import.meta.dir, "..");
const env = process.env;
const log = (m: string) => console.log(`[dev] ${m}`);
const num = (name: string, def: number) => {
  const v = env[name];
  if (v === undefined || v === "") return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 65534) throw new Error(`${name} must be a port number (got "${v}")`);
  return n;
};

const dataDir = join(env.DATA_DIR ?? join(root, ".data"), "regions");
const regions = (env.REGIONS ?? "fsn1,hel1").split(",").map((r) => r.trim());
const apiKeys = env.API_KEYS ?? "dev-key";
const providerKey = env.PROVIDER_KEY ?? "emulator-key";
const ports = {
  gateway: num("GATEWAY_PORT", 8080),
  nats: num("NATS_PORT", 14222),
  leaf: num("LEAF_PORT", 17422),
  pg: num("PG_PORT", 15432),
  emulator: num("EMULATOR_PORT", 18090),
  metrics: num("METRICS_PORT", 9464),
};

const stops: Array<() => Promise<void>> = [];
const children: ChildProcess[] = [];
let stopping = false;
async function shutdown(code: number) {
  if (stopping) return;
  stopping = true;
  log("stopping");
  // The apps first (they drain), then the emulator, the servers.
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((res) => {
          if (c.exitCode !== null || c.signalCode !== null) return res();
          c.once("exit", () => res());
          c.kill("SIGTERM");
        }),
    ),
  );
  for (const stop of stops.reverse()) await stop().catch((e) => log(`stop failed: ${(e as Error).message}`));
  log("stopped");
  process.exit(code);
}
process.on("SIGINT", () => void shutdown(0));
process.on("SIGTERM", () => void shutdown(0));

/** Runs `bun <script>` with its output prefixed by `[<name>]`. */
function run(name: string, script: string, vars: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, [join(root, script)], {
    cwd: root,
    env: { ...env, ...vars },
    stdio: ["ignore", "pipe", "pipe"],
  });
  for (const s of [child.stdout!, child.stderr!]) {
    let rest = "";
    s.on("data", (b: Buffer) => {
      const lines = (rest + b.toString()).split("\n");
      rest = lines.pop()!;
      for (const l of lines) console.log(`[${name}] ${l}`);
    });
  }
  child.on("exit", (code, signal) => {
    // A Ctrl-C reaches the apps too (one process group): only an exit of its own stops the stack.
    setTimeout(() => {
      if (stopping) return;
      log(`${name} exited (${signal ?? `code ${code}`}): stopping the stack`);
      void shutdown(1);
    }, 1000);
  });
  children.push(child);
  return child;
}

try {
  if (regions.length !== 2 || new Set(regions).size !== 2 || !regions.every((r) => /^[a-z][a-z0-9]{1,15}$/.test(r)))
    throw new Error(`REGIONS must name two regions (got "${env.REGIONS}")`);
  const natsPorts = [ports.nats, ports.nats + 1, ports.nats + 2];
  const gatewayPorts = [ports.gateway, ports.gateway + 1];
  for (const p of [...natsPorts, ...gatewayPorts, ports.leaf, ports.pg, ports.emulator])
    if (await portInUse(p))
      throw new Error(
        `port ${p} is taken; is another dev stack running? (GATEWAY_PORT, NATS_PORT, LEAF_PORT, PG_PORT, EMULATOR_PORT)`,
      );
  mkdirSync(dataDir, { recursive: true });

  const witness = await startNatsServer({
    port: natsPorts[2]!,
    storeDir: join(dataDir, "witness"),
    name: "witness",
    log,
  });
  stops.push(() => witness.stop());
  const [ra, rb] = regions as [string, string];
  const a = await startNatsServer({
    port: natsPorts[0]!,
    storeDir: join(dataDir, ra, "nats"),
    name: `${ra}-1`,
    regions: [ra],
    domain: ra,
    leafnodes: { listenPort: ports.leaf },
    log,
  });
  stops.push(() => a.stop());
  const b = await startNatsServer({
    port: natsPorts[1]!,
    storeDir: join(dataDir, rb, "nats"),
    name: `${rb}-1`,
    regions: [rb],
    domain: rb,
    leafnodes: { remotes: [{ host: "127.0.0.1", port: ports.leaf, credentials: a.leafCredentials }] },
    log,
  });
  stops.push(() => b.stop());
  log(
    `NATS ${a.version}: ${ra} on ${a.url}, ${rb} on ${b.url} (leafnode ${rb} -> ${ra} on port ${ports.leaf}), witness on ${witness.url}`,
  );

  const pg = await startPostgres({ dataDir: join(dataDir, "pg"), port: ports.pg, log });
  stops.push(() => pg.stop());
  const databases: Record<string, string> = {};
  for (const r of regions) {
    await pg.ensureDatabase(`pipeline_${r}`);
    databases[r] = pg.urlFor(`pipeline_${r}`);
    await migrateDatabase(databases[r]!);
  }
  // Each app its own login, a member of its role (packages/shared/src/db/roles.ts), fresh passwords
  // at every start; the recovery services are the owner (the admin).
  const admin = openDatabase(pg.adminUrl, { max: 1, appName: "dev-stack" });
  const logins = await createAppLogins(admin.sql, "dev").finally(() => admin.close());
  log(
    `Postgres on port ${ports.pg}: databases ${regions.map((r) => `pipeline_${r}`).join(", ")}; migrations applied; a login per app (dev_gateway_login, dev_solver_login)`,
  );

  run("emulator", "packages/emulator/src/main.ts", {
    EMULATOR_PORT: String(ports.emulator),
    EMULATOR_KEYS: `${providerKey}:100`,
    EMULATOR_LATENCY_MS: env.EMULATOR_LATENCY_MS ?? "2000",
  });
  await waitForPort(ports.emulator, 20_000);

  const servers: Record<string, NatsServerHandle> = { [ra]: a, [rb]: b };
  // Each region's streams, buckets and notifier consumers, as its recovery service makes them at
  // start: the gateway's and the solver's NATS users may not create them (issue 34).
  for (const r of regions) await provisionRegionsAt(servers[r]!.url, servers[r]!.auth("admin"), [r]);
  const w = witness.auth("recovery");
  for (const [i, r] of regions.entries()) {
    const nats = servers[r]!;
    const common = {
      REGION: r,
      REGIONS: regions.join(","),
      NATS_URL: nats.url,
      DATABASE_URL: databases[r]!,
      LOG_LEVEL: env.LOG_LEVEL ?? "info",
      // A dev stack: the published dev secrets and an unpeppered gateway are accepted (docs/security.md).
      PIPELINE_ENV: "dev",
      WEBHOOK_SECRET: env.WEBHOOK_SECRET ?? "dev-webhook-secret-0001",
      // Dev receivers listen on http://127.0.0.1: the callback SSRF policy is loosened (docs/security.md).
      WEBHOOK_ALLOW_HTTP: "1",
      WEBHOOK_ALLOW_PRIVATE: "1",
    };
    run(`${r} gateway`, "apps/gateway/src/main.ts", {
      ...common,
      DATABASE_URL: urlWithLogin(databases[r]!, logins.gateway),
      ...natsEnv(nats, "gateway"),
      GATEWAY_PORT: String(gatewayPorts[i]),
      API_KEYS: apiKeys,
      ...(env.API_KEYS ? {} : { API_KEYS_ALLOW_SHORT: "1" }),
    });
    run(`${r} solver`, "apps/solver/src/main.ts", {
      ...common,
      DATABASE_URL: urlWithLogin(databases[r]!, logins.solver),
      ...natsEnv(nats, "solver"),
      WORKER_ID: `solver-${r}`,
      PROVIDER_URL: `http://127.0.0.1:${ports.emulator}`,
      PROVIDER_KEY: providerKey,
      FIRST_POLL_MS: "1000",
      POLL_INTERVAL_MS: "1000",
      METRICS_PORT: String(ports.metrics + i),
    });
    run(`${r} recovery`, "apps/recovery/src/main.ts", {
      ...common,
      ...natsEnv(nats, "recovery"),
      DATA_DIR: join(dataDir, r),
      WITNESS_URL: witness.url,
      WITNESS_USER: w.user!,
      WITNESS_PASSWORD: w.pass!,
    });
  }
  for (const p of gatewayPorts) await waitForPort(p, 60_000);

  const key = apiKeys.split(",")[0];
  console.log(`
  two regions, one machine (docs/regions.md)
  ${ra} gateway  http://127.0.0.1:${gatewayPorts[0]}   (API key: ${env.API_KEYS ? "(yours)" : key}; NATS ${a.url}, domain ${ra}; Postgres ${redactPassword(databases[ra]!)})
  ${rb} gateway  http://127.0.0.1:${gatewayPorts[1]}   (API key: ${env.API_KEYS ? "(yours)" : key}; NATS ${b.url}, domain ${rb}; Postgres ${redactPassword(databases[rb]!)})
  witness       ${witness.url}   (region leases; each region submits to the provider only while it holds its lease)
  emulator      http://127.0.0.1:${ports.emulator}   (the provider of both; stats at /emulator/stats)
  NATS users    passwords in <store>/credentials.json (0600) under ${dataDir}

  A task's home region is in its id: either gateway answers reads of both regions' tasks; a
  gateway turns new tasks away (503) until its region holds its lease, a few seconds after start.
  try:  curl -s -X POST http://127.0.0.1:${gatewayPorts[0]}/v1/tasks -H 'authorization: Bearer ${env.API_KEYS ? "<your key>" : key}' \\
          -H 'content-type: application/json' \\
          -d '{"type":"turnstile","params":{"sitekey":"0x4AAAAAAA","pageurl":"https://example.com/login"}}'
        curl -s 'http://127.0.0.1:${gatewayPorts[1]}/v1/tasks/<id>?wait=30' -H 'authorization: Bearer ${env.API_KEYS ? "<your key>" : key}'
`);
} catch (err) {
  log(`cannot start the two-region dev stack: ${(err as Error).message}`);
  await shutdown(1);
}
// Stays up until Ctrl-C: the servers and apps are this process's children.
setInterval(() => {}, 1 << 30);
