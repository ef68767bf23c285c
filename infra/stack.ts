// The `dev` task of the @pipeline/infra workspace: NATS (a current server, authentication on)
// and Postgres of the project's own under .data/, migrations, and `.data/dev-stack.json` that the
// apps' dev tasks wait for (infra/with-stack.ts). The servers are the stack builder's dev servers
// (@pipeline/devstack/stack's ownServers); the apps are turbo's dev tasks. `turbo run dev` runs it beside the apps;
// Ctrl-C stops the servers and removes the file; a second start reuses the data.

import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { devStackFile, redactPassword, removeDevStack, writeDevStack, writePgCredentials } from "@pipeline/devstack";
import { ownServers } from "@pipeline/devstack/stack";
import { migrateDatabase } from "@pipeline/shared/db";
import { provisionRegionsAt } from "@pipeline/shared/provision";

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
const stackFile = devStackFile(env);
const region = env.REGION ?? "local";
const natsPort = num("NATS_PORT", 14222);
const pgPort = num("PG_PORT", 15432);
const gatewayPort = num("GATEWAY_PORT", 8080);
const emulatorPort = num("EMULATOR_PORT", 18090);
// The second provider (docs/providers.md): its own key, higher prices, slower solves.
const emulatorBPort = num("EMULATOR_B_PORT", emulatorPort + 1);
const consolePort = num("CONSOLE_PORT", 8090);

const stops: Array<() => Promise<void>> = [];
let stopping = false;
async function shutdown(code: number) {
  if (stopping) return;
  stopping = true;
  log("stopping");
  removeDevStack(stackFile);
  for (const stop of stops.reverse()) await stop().catch((e) => log(`stop failed: ${(e as Error).message}`));
  log("stopped");
  process.exit(code);
}
process.on("SIGINT", () => void shutdown(0));
process.on("SIGTERM", () => void shutdown(0));

try {
  // NATS_URL set: the apps use that server with the NATS_USER/NATS_PASSWORD or NATS_CREDS you give them.
  let nats: { url: string; version: string; credentialsFile: string | undefined } = {
    url: env.NATS_URL ?? "",
    version: "(yours)",
    credentialsFile: undefined,
  };
  // The stack builder's dev servers (@pipeline/devstack/stack): stores under .data/, fixed ports.
  const servers = ownServers({
    dataDir,
    ports: { [`nats:${region}`]: natsPort },
    portSetting: () => "NATS_PORT",
    pgPort,
    natsStore: () => join(dataDir, "nats"),
    databaseName: () => "pipeline",
    log,
  });
  stops.push(() => servers.stop());
  if (!env.NATS_URL) {
    const own = await servers.nats({ name: region, regions: [region] });
    stops.push(() => own.stop());
    nats = own;
    // The region's streams, buckets and notifier consumers, as the recovery service makes them at
    // start: the gateway's and the solver's NATS users may not create them.
    await provisionRegionsAt(own.url, own.auth("admin"), [region]);
    log(
      `NATS ${own.version} (JetStream, authentication on) on ${own.url}; credentials in ${own.credentialsFile} (0600)`,
    );
  }

  let databaseUrl = env.DATABASE_URL;
  let pgCredentials: string | undefined;
  if (databaseUrl) {
    await migrateDatabase(databaseUrl);
    log("migrations applied");
  } else {
    // Migrated, and each app its own login, a member of its role (packages/shared/src/db/roles.ts),
    // with fresh passwords at every start, in a 0600 file; the recovery service is the owner (the admin).
    const db = await servers.database(region);
    log(`Postgres on ${redactPassword(db.url)} (data ${join(dataDir, "pg")}); migrations applied`);
    const login = (url: string) => {
      const u = new URL(url);
      return { user: decodeURIComponent(u.username), password: decodeURIComponent(u.password) };
    };
    pgCredentials = join(dataDir, "pg-credentials.json");
    writePgCredentials(pgCredentials, {
      owner: login(db.url),
      gateway: login(db.appUrls.gateway),
      solver: login(db.appUrls.solver),
      rollout: login(db.appUrls.rollout),
    });
    const u = new URL(db.url);
    u.password = "";
    databaseUrl = u.toString();
    log(
      `Postgres logins: one per app (dev_gateway_login, dev_solver_login, dev_rollout_login), passwords in ${pgCredentials} (0600)`,
    );
  }

  const emulatorKey = "emulator-key";
  const spareKey = "emulator-key-spare";
  // The solvers' key file: `recovery rotate-key --to spare` switches the fleet to the second key.
  const keysFile = join(dataDir, "provider-keys.json");
  if (!env.PROVIDER_KEYS_FILE)
    writeFileSync(keysFile, JSON.stringify({ default: env.PROVIDER_KEY ?? emulatorKey, spare: spareKey }, null, 2), {
      mode: 0o600,
    });
  // The operator console's sign-in (recovery, CONSOLE_PORT): one generated operator token, kept
  // across starts in a 0600 file like the NATS credentials; never in dev-stack.json.
  const consoleTokensFile = join(dataDir, "console-tokens");
  let operatorToken = existsSync(consoleTokensFile)
    ? /^dev-operator:operator:(\S+)$/m.exec(readFileSync(consoleTokensFile, "utf8"))?.[1]
    : undefined;
  if (!operatorToken && !env.CONSOLE_TOKENS_FILE) {
    operatorToken = randomBytes(24).toString("base64url");
    writeFileSync(
      consoleTokensFile,
      `# name:role:token, one a line (roles viewer, operator); read by the recovery service's console\ndev-operator:operator:${operatorToken}\n`,
      { mode: 0o600 },
    );
  }
  // Dev defaults of what the user did not set: the apps merge them under their own environment.
  const defaults: Record<string, string> = {
    REGION: region,
    GATEWAY_PORT: String(gatewayPort),
    API_KEYS: "dev-key",
    // `dev-key` is short: a dev stack accepts it (outside dev the gateway wants 32+ characters).
    API_KEYS_ALLOW_SHORT: "1",
    PIPELINE_ENV: "dev",
    // The gateway's /metrics, apart from the clients' port (infra/prometheus scrapes it).
    GATEWAY_METRICS_PORT: "9466",
    EMULATOR_PORT: String(emulatorPort),
    EMULATOR_KEYS: `${emulatorKey}:50,${spareKey}:50`,
    PROVIDER_KEYS_FILE: keysFile,
    DRILL_API_KEY: (env.API_KEYS ?? "dev-key").split(",")[0]!,
    PROVIDER_URL: `http://127.0.0.1:${emulatorPort}`,
    PROVIDER_KEY: emulatorKey,
    EMULATOR_B_PORT: String(emulatorBPort),
    EMULATOR_B_KEYS: "emulator-key-b:200",
    PROVIDER_KEY_B: "emulator-key-b",
    PROVIDERS: JSON.stringify([
      {
        id: "b",
        url: `http://127.0.0.1:${emulatorBPort}`,
        keyEnv: "PROVIDER_KEY_B",
        prices: { recaptcha_v2: 0.004, recaptcha_v3: 0.004, turnstile: 0.002, geetest: 0.004, image: 0.0015 },
      },
    ]),
    FIRST_POLL_MS: "1000",
    POLL_INTERVAL_MS: "1000",
    WEBHOOK_SECRET: "dev-webhook-secret-0001",
    // Dev receivers listen on http://127.0.0.1: the callback SSRF policy is loosened (docs/security.md).
    WEBHOOK_ALLOW_HTTP: "1",
    WEBHOOK_ALLOW_PRIVATE: "1",
    DATA_DIR: dataDir,
    CONSOLE_PORT: String(consolePort),
    CONSOLE_TOKENS_FILE: consoleTokensFile,
  };
  for (const k of Object.keys(defaults)) if (env[k]) delete defaults[k];
  // A provider of the user's own: no emulated second account beside it.
  if (env.PROVIDER_URL) for (const k of ["PROVIDERS", "PROVIDER_KEY_B"]) delete defaults[k];
  writeDevStack(stackFile, {
    pid: process.pid,
    startedAt: new Date().toISOString(),
    natsUrl: nats.url,
    natsVersion: nats.version,
    ...(nats.credentialsFile ? { natsCredentials: nats.credentialsFile } : {}),
    databaseUrl,
    ...(pgCredentials ? { pgCredentials } : {}),
    env: defaults,
  });

  const apiKey = (env.API_KEYS ?? "dev-key").split(",")[0];
  const provider = env.PROVIDER_URL ?? defaults.PROVIDER_URL;
  console.log(`
  gateway   http://127.0.0.1:${gatewayPort}   (API key: ${env.API_KEYS ? "(yours)" : apiKey}; each client's callback signing secret: GET /v1/webhook-secret)
  emulator  ${provider}   (provider; stats at /emulator/stats)${env.PROVIDER_URL ? "" : `\n  second    http://127.0.0.1:${emulatorBPort}   (provider B: dearer, slower; takes the tasks when the first is down or full)`}
  metrics   gateway http://127.0.0.1:${env.GATEWAY_METRICS_PORT ?? "9466"}/metrics, solver http://127.0.0.1:${env.METRICS_PORT ?? "9464"}/metrics
  console   http://127.0.0.1:${consolePort}/console   (operator token: ${env.CONSOLE_TOKENS_FILE ? "(yours)" : `${operatorToken}, in ${consoleTokensFile} (0600)`})
  NATS      ${nats.url}   (nats-server ${nats.version}${nats.credentialsFile ? `; users per app, passwords in ${nats.credentialsFile}` : ""})
  Postgres  ${redactPassword(databaseUrl)}${pgCredentials ? `   (a login per app; passwords in ${pgCredentials}, 0600)` : ""}
  settings  ${stackFile}   (read by the apps' dev tasks and by \`npm run recovery -- <command>\`)

  try:  curl -s -X POST http://127.0.0.1:${gatewayPort}/v1/tasks -H 'authorization: Bearer ${env.API_KEYS ? "<your key>" : apiKey}' \\
          -H 'content-type: application/json' \\
          -d '{"type":"turnstile","params":{"sitekey":"0x4AAAAAAA","pageurl":"https://example.com/login"}}'
        curl -s 'http://127.0.0.1:${gatewayPort}/v1/tasks/<id>?wait=30' -H 'authorization: Bearer ${env.API_KEYS ? "<your key>" : apiKey}'
        npm run recovery -- assess
`);
} catch (err) {
  log(`cannot start the dev stack: ${(err as Error).message}`);
  await shutdown(1);
}
// Stays up until Ctrl-C (turbo forwards it): the servers are this task's children.
setInterval(() => {}, 1 << 30);
