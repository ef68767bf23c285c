// `npm run dev -- --regions 2`: both regions and the witness on one machine (docs/regions.md).
// Each region has its own nats-server (its own JetStream domain; hel1's leafnode connects to
// fsn1's), its own database, gateway, solver and recovery service (replicator and lease keeper);
// a witness nats-server holds the region leases; one emulator is the provider of both. The two
// databases live on one Postgres server of the stack's own (separate servers buy nothing on one
// machine). Data under <DATA_DIR>/regions, reused by the next start; Ctrl-C stops everything.
// Ports: GATEWAY_PORT (8080) and the next one for the second region, NATS_PORT (14222) and the
// next two for the second region and the witness, LEAF_PORT (17422), PG_PORT (15432),
// EMULATOR_PORT (18090), METRICS_PORT (9464, the solvers': this one and the next).
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { redactPassword, waitForPort } from "@pipeline/devstack";
import { consoleLauncher, ownServers, type PortName, type StackHandle, startStack } from "@pipeline/devstack/stack";

const root = join(import.meta.dir, "..");
const env = process.env;
const log = (m: string) => console.log(`[dev] ${m}`);
const num = (name: string, def: number) => {
  const v = env[name];
  if (v === undefined || v === "") return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 65535) throw new Error(`${name} must be a port number (got "${v}")`);
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

let stack: StackHandle | undefined;
let stopEmulator: (() => Promise<unknown>) | undefined;
let stopping = false;
async function shutdown(code: number) {
  if (stopping) return;
  stopping = true;
  log("stopping");
  // The apps first (they drain), then the servers; the emulator last.
  await stack?.stop().catch((e) => log(`stop failed: ${(e as Error).message}`));
  await stopEmulator?.();
  log("stopped");
  process.exit(code);
}
process.on("SIGINT", () => void shutdown(0));
process.on("SIGTERM", () => void shutdown(0));

/** The dev ports: a region's NATS and gateway on the base port and the next, the witness's NATS after them. */
function fixedPorts(ra: string, rb: string): Partial<Record<PortName, number>> {
  return {
    [`nats:${ra}`]: ports.nats,
    [`nats:${rb}`]: ports.nats + 1,
    "nats:witness": ports.nats + 2,
    leaf: ports.leaf,
    [`gateway:${ra}`]: ports.gateway,
    [`gateway:${rb}`]: ports.gateway + 1,
    [`solver-metrics:${ra}`]: ports.metrics,
    [`solver-metrics:${rb}`]: ports.metrics + 1,
  };
}
const portSetting = (what: PortName) =>
  what.startsWith("nats:")
    ? "NATS_PORT"
    : what === "leaf"
      ? "LEAF_PORT"
      : what.startsWith("gateway:")
        ? "GATEWAY_PORT"
        : "METRICS_PORT";

try {
  if (regions.length !== 2 || new Set(regions).size !== 2 || !regions.every((r) => /^[a-z][a-z0-9]{1,15}$/.test(r)))
    throw new Error(`REGIONS must name two regions (got "${env.REGIONS}")`);
  if (ports.nats > 65533 || ports.gateway > 65534 || ports.metrics > 65534)
    throw new Error("NATS_PORT needs the next two ports free, GATEWAY_PORT and METRICS_PORT the next one");
  const [ra, rb] = regions as [string, string];
  const logDir = join(dataDir, "logs");
  mkdirSync(logDir, { recursive: true });
  const launcher = consoleLauncher({
    logDir,
    // A Ctrl-C reaches the apps too (one process group): only an exit of its own stops the stack.
    onExit: (name, code) =>
      setTimeout(() => {
        if (stopping) return;
        log(`${name} exited (code ${code}): stopping the stack`);
        void shutdown(1);
      }, 1000),
  });
  const emulator = launcher("emulator", "packages/emulator/src/main.ts", {
    EMULATOR_PORT: String(ports.emulator),
    EMULATOR_KEYS: `${providerKey}:100`,
    EMULATOR_LATENCY_MS: env.EMULATOR_LATENCY_MS ?? "2000",
  });
  stopEmulator = () => emulator.kill("SIGTERM");
  await waitForPort(ports.emulator, 20_000);
  // Both databases live on one Postgres server of the stack's own (separate servers buy nothing on one machine).
  stack = await startStack({
    regions,
    profile: "dev",
    servers: ownServers({ dataDir, ports: fixedPorts(ra, rb), portSetting, pgPort: ports.pg, log }),
    launcher,
    logDir,
    provider: { url: `http://127.0.0.1:${ports.emulator}`, key: providerKey },
    apiKeys,
    dataDir: (r) => join(dataDir, r),
  });
  const [a, b] = stack.regions as [(typeof stack.regions)[number], (typeof stack.regions)[number]];
  const witness = stack.witness!;
  log(
    `NATS ${a.nats.version}: ${ra} on ${a.nats.url}, ${rb} on ${b.nats.url} (leafnode ${rb} -> ${ra} on port ${ports.leaf}), witness on ${witness.url}`,
  );
  const gatewayPorts = [a.gatewayPort, b.gatewayPort];
  const databases = { [ra]: a.database.url, [rb]: b.database.url };
  const key = apiKeys.split(",")[0];
  console.log(`
  two regions, one machine (docs/regions.md)
  ${ra} gateway  http://127.0.0.1:${gatewayPorts[0]}   (API key: ${env.API_KEYS ? "(yours)" : key}; NATS ${a.nats.url}, domain ${ra}; Postgres ${redactPassword(databases[ra]!)})
  ${rb} gateway  http://127.0.0.1:${gatewayPorts[1]}   (API key: ${env.API_KEYS ? "(yours)" : key}; NATS ${b.nats.url}, domain ${rb}; Postgres ${redactPassword(databases[rb]!)})
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
