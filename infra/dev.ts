// `npm run dev`: NATS and Postgres of the project's own under .data/, migrations, then every
// app through `turbo run dev`. Ctrl-C stops everything; a second start reuses the data.
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { migrateDatabase } from "@pipeline/shared/db";
import { portInUse, startNatsServer, startPostgres } from "@pipeline/shared/localstack";

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

const dataDir = env.DATA_DIR ?? join(root, ".data");
const natsPort = num("NATS_PORT", 14222);
const pgPort = num("PG_PORT", 15432);
const gatewayPort = num("GATEWAY_PORT", 8080);
const emulatorPort = num("EMULATOR_PORT", 18090);

const stops: Array<() => Promise<void>> = [];
let natsUrl = env.NATS_URL;
if (!natsUrl) {
  if (await portInUse(natsPort)) throw new Error(`port ${natsPort} is taken; is another 'npm run dev' running? Set NATS_PORT or NATS_URL`);
  const nats = await startNatsServer({ port: natsPort, storeDir: join(dataDir, "nats"), name: "dev", log });
  stops.push(() => nats.stop());
  natsUrl = nats.url;
  log(`NATS JetStream on ${natsUrl} (store ${join(dataDir, "nats")})`);
}
let databaseUrl = env.DATABASE_URL;
if (!databaseUrl) {
  const pg = await startPostgres({ dataDir: join(dataDir, "pg"), port: pgPort, log });
  stops.push(() => pg.stop());
  await pg.ensureDatabase("pipeline");
  databaseUrl = pg.urlFor("pipeline");
  log(`Postgres on ${databaseUrl} (data ${pg.dataDir})`);
}
await migrateDatabase(databaseUrl);
log("migrations applied");

const emulatorKey = "emulator-key";
const spareKey = "emulator-key-spare";
// The solvers' key file: `recovery rotate-key --to spare` switches the fleet to the second key.
const keysFile = env.PROVIDER_KEYS_FILE ?? join(dataDir, "provider-keys.json");
if (!env.PROVIDER_KEYS_FILE) writeFileSync(keysFile, JSON.stringify({ default: env.PROVIDER_KEY ?? emulatorKey, spare: spareKey }, null, 2), { mode: 0o600 });
const childEnv: Record<string, string> = {
  ...(env as Record<string, string>),
  NATS_URL: natsUrl,
  DATABASE_URL: databaseUrl,
  GATEWAY_PORT: String(gatewayPort),
  API_KEYS: env.API_KEYS ?? "dev-key",
  EMULATOR_PORT: String(emulatorPort),
  EMULATOR_KEYS: env.EMULATOR_KEYS ?? `${emulatorKey}:50,${spareKey}:50`,
  PROVIDER_KEYS_FILE: keysFile,
  DRILL_API_KEY: env.DRILL_API_KEY ?? (env.API_KEYS ?? "dev-key").split(",")[0]!,
  PROVIDER_URL: env.PROVIDER_URL ?? `http://127.0.0.1:${emulatorPort}`,
  PROVIDER_KEY: env.PROVIDER_KEY ?? emulatorKey,
  FIRST_POLL_MS: env.FIRST_POLL_MS ?? "1000",
  WEBHOOK_SECRET: env.WEBHOOK_SECRET ?? "dev-webhook-secret-0001",
  // Local receivers listen on http://127.0.0.1: loosen the callback SSRF policy (docs/security.md).
  WEBHOOK_ALLOW_HTTP: env.WEBHOOK_ALLOW_HTTP ?? "1",
  WEBHOOK_ALLOW_PRIVATE: env.WEBHOOK_ALLOW_PRIVATE ?? "1",
  TURBO_TELEMETRY_DISABLED: "1",
  DO_NOT_TRACK: "1",
  POLL_INTERVAL_MS: env.POLL_INTERVAL_MS ?? "1000",
};
const apiKey = childEnv.API_KEYS!.split(",")[0];
const turbo = spawn(join(root, "node_modules", ".bin", "turbo"), ["run", "dev", "--env-mode=loose", "--ui=stream", "--log-prefix=task"], {
  cwd: root,
  env: childEnv,
  stdio: "inherit",
});
console.log(`
  gateway   http://127.0.0.1:${gatewayPort}   (API key: ${apiKey}; callbacks signed with WEBHOOK_SECRET=${childEnv.WEBHOOK_SECRET === "dev-webhook-secret-0001" ? childEnv.WEBHOOK_SECRET : "(yours)"})
  emulator  ${childEnv.PROVIDER_URL}   (provider; stats at /emulator/stats)
  metrics   http://127.0.0.1:${gatewayPort}/metrics, solver http://127.0.0.1:9464/metrics
  NATS      ${natsUrl}
  Postgres  ${databaseUrl}

  try:  curl -s -X POST http://127.0.0.1:${gatewayPort}/v1/tasks -H 'authorization: Bearer ${apiKey}' \\
          -H 'content-type: application/json' \\
          -d '{"type":"turnstile","params":{"sitekey":"0x4AAAAAAA","pageurl":"https://example.com/login"}}'
        curl -s 'http://127.0.0.1:${gatewayPort}/v1/tasks/<id>?wait=30' -H 'authorization: Bearer ${apiKey}'
`);

let stopping = false;
async function shutdown(code: number) {
  if (stopping) return;
  stopping = true;
  log("stopping");
  if (turbo.exitCode === null) {
    turbo.kill("SIGINT");
    await new Promise((r) => turbo.once("exit", r));
  }
  for (const stop of stops.reverse()) await stop().catch((e) => log(`stop failed: ${(e as Error).message}`));
  log("stopped");
  process.exit(code);
}
process.on("SIGINT", () => void shutdown(0));
process.on("SIGTERM", () => void shutdown(0));
turbo.on("exit", (code) => void shutdown(code ?? 1));
