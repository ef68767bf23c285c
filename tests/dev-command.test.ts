import { expect, test } from "bun:test";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, portInUse } from "@pipeline/devstack";
import { eventually } from "@pipeline/devstack/testing";
import type { TaskView } from "@pipeline/shared/schemas";
import postgres from "postgres";
import { ROOT } from "./harness.ts";

/**
 * The dev stack as a user starts it (`npx turbo run dev` in a fresh clone, or the README's
 * `npm run dev`): NATS and Postgres of its own, the emulator, gateway, solver and recovery.
 */
async function runDev(how: "turbo" | "npm", dataDir: string, ports: Record<string, number>) {
  const env: Record<string, string | undefined> = {
    ...process.env,
    DATA_DIR: dataDir,
    TURBO_TELEMETRY_DISABLED: "1",
    NATS_PORT: String(ports.nats),
    PG_PORT: String(ports.pg),
    GATEWAY_PORT: String(ports.gateway),
    EMULATOR_PORT: String(ports.emulator),
    EMULATOR_LATENCY_MS: "200",
    METRICS_PORT: String(ports.metrics),
    GATEWAY_METRICS_PORT: String(ports.gatewayMetrics),
    CONSOLE_PORT: String(ports.console),
  };
  delete env.DATABASE_URL;
  delete env.NATS_URL;
  delete env.TEST_PG_ADMIN_URL;
  let out = "";
  const cmd = how === "npm" ? ["npm", "run", "dev"] : ["npx", "turbo", "run", "dev", "--ui=stream"];
  const child = spawn(cmd[0]!, cmd.slice(1), { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
  child.stdout!.on("data", (b) => (out += b));
  child.stderr!.on("data", (b) => (out += b));
  const exited = new Promise<{ code: number | null; signal: string | null }>((r) =>
    child.on("exit", (code, signal) => r({ code, signal })),
  );
  const ready = await eventually(
    async () => {
      const res = await fetch(`http://127.0.0.1:${ports.gateway}/readyz`).catch(() => undefined);
      return res?.status === 200;
    },
    90_000,
    250,
  ).catch((e) => {
    throw new Error(`${(e as Error).message}\n--- dev output ---\n${out}`);
  });
  expect(ready).toBe(true);
  return {
    output: () => out,
    /** Ctrl-C in a terminal: SIGINT to the whole foreground process group. */
    async stop() {
      process.kill(-child.pid!, "SIGINT");
      const { code, signal } = await exited;
      // npm itself exits by the signal; what matters is that everything below it stops cleanly.
      expect(code === 0 || signal === "SIGINT").toBe(true);
      for (const p of Object.values(ports)) await eventually(async () => !(await portInUse(p)), 30_000, 100);
      await eventually(() => out.includes("[dev] stopped"), 30_000, 100);
      // Nothing left behind: no process of this stack (each names the data folder or runs in its group).
      await eventually(() => leftovers(dataDir, child.pid!).length === 0, 30_000, 200).catch(() => {
        throw new Error(`processes left behind:\n${leftovers(dataDir, child.pid!).join("\n")}`);
      });
      expect(existsSync(join(dataDir, "dev-stack.json"))).toBe(false);
    },
  };
}

/** Processes still running in the dev command's process group or naming its data folder. */
function leftovers(dataDir: string, pgid: number): string[] {
  const ps = spawnSync("ps", ["-eo", "pid=,pgid=,args="], { encoding: "utf8" }).stdout.split("\n");
  return ps.filter((l) => {
    const [, pid, group, args] = /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(l) ?? [];
    if (!pid || Number(pid) === process.pid) return false;
    return Number(group) === pgid || (args ?? "").includes(dataDir);
  });
}

/** `npm run recovery -- assess` in a second terminal: it finds the running stack by itself. */
function assessAgainstDev(dataDir: string): { code: number | null; out: string } {
  const env: Record<string, string | undefined> = { ...process.env, DATA_DIR: dataDir };
  for (const k of ["DATABASE_URL", "NATS_URL", "NATS_USER", "NATS_PASSWORD", "TEST_PG_ADMIN_URL"]) delete env[k];
  const r = spawnSync("npm", ["run", "-s", "recovery", "--", "assess"], {
    cwd: ROOT,
    env,
    encoding: "utf8",
    timeout: 60_000,
  });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

const auth = { authorization: "Bearer dev-key", "content-type": "application/json" };

test("turbo run dev serves a task end to end, recovery finds it, Ctrl-C leaves nothing, and npm run dev keeps the data", async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "pipeline-dev-"));
  const ports = {
    nats: await freePort(),
    pg: await freePort(),
    gateway: await freePort(),
    emulator: await freePort(),
    metrics: await freePort(),
    gatewayMetrics: await freePort(),
    console: await freePort(),
  };
  try {
    const dev = await runDev("turbo", dataDir, ports);
    const sub = await fetch(`http://127.0.0.1:${ports.gateway}/v1/tasks`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({
        type: "turnstile",
        params: { sitekey: "0x4AAAAAAA", pageurl: "https://example.com/login" },
      }),
    });
    expect(sub.status).toBe(202);
    const { id } = (await sub.json()) as { id: string };
    const view = (await (
      await fetch(`http://127.0.0.1:${ports.gateway}/v1/tasks/${id}?wait=30`, { headers: auth })
    ).json()) as TaskView;
    expect(view.status).toBe("completed");
    expect(view.result!.token.length).toBeGreaterThan(10);
    expect(dev.output()).toContain("API key: dev-key");
    // The dev gateway's /metrics is on its metrics listener, not on the clients' port (issue 14.7).
    expect((await fetch(`http://127.0.0.1:${ports.gatewayMetrics}/metrics`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${ports.gateway}/metrics`)).status).toBe(404);
    expect(dev.output()).toMatch(/NATS 2\.(1[4-9]|[2-9]\d)\.\d+ \(JetStream, authentication on\)/);
    // No password in what the dev stack prints or leaves in its settings file.
    const creds = JSON.parse(readFileSync(join(dataDir, "nats", "credentials.json"), "utf8")) as Record<
      string,
      { password: string }
    >;
    for (const c of Object.values(creds)) {
      expect(dev.output()).not.toContain(c.password);
      expect(readFileSync(join(dataDir, "dev-stack.json"), "utf8")).not.toContain(c.password);
    }
    // The operator console: its URL and a generated operator token printed, the token in a 0600 file.
    const tokenLine = /^dev-operator:operator:(\S+)$/m.exec(readFileSync(join(dataDir, "console-tokens"), "utf8"));
    expect(statSync(join(dataDir, "console-tokens")).mode & 0o777).toBe(0o600);
    expect(dev.output()).toContain(
      `console   http://127.0.0.1:${ports.console}/console   (operator token: ${tokenLine![1]}`,
    );
    const consoleState = await eventually(
      async () => {
        const r = await fetch(`http://127.0.0.1:${ports.console}/console/api/state`, {
          headers: { authorization: `Bearer ${tokenLine![1]}` },
        }).catch(() => undefined);
        return r?.status === 200 ? ((await r.json()) as { tasks: Array<{ state: string; n: number }> }) : undefined;
      },
      30_000,
      250,
    );
    expect(consoleState.tasks.find((t) => t.state === "completed")?.n).toBe(1);
    expect(
      (
        await fetch(`http://127.0.0.1:${ports.console}/console/api/state`, {
          headers: { authorization: "Bearer dev-key" },
        })
      ).status,
    ).toBe(401);
    // Postgres (issue 34): each app on its own login; the passwords only in the 0600 file; no
    // connection without a password.
    const pgFile = join(dataDir, "pg-credentials.json");
    expect(statSync(pgFile).mode & 0o777).toBe(0o600);
    const pgCreds = JSON.parse(readFileSync(pgFile, "utf8")) as Record<
      "owner" | "gateway" | "solver" | "rollout",
      { user: string; password: string }
    >;
    for (const c of Object.values(pgCreds)) {
      expect(dev.output()).not.toContain(c.password);
      expect(readFileSync(join(dataDir, "dev-stack.json"), "utf8")).not.toContain(c.password);
    }
    const pgAdmin = postgres({
      host: "127.0.0.1",
      port: ports.pg,
      database: "pipeline",
      user: pgCreds.owner.user,
      password: pgCreds.owner.password,
      max: 1,
      onnotice: () => {},
    });
    const sessions = await pgAdmin<
      { usename: string; app: string }[]
    >`select usename, application_name as app from pg_stat_activity where datname = 'pipeline' and (application_name = 'gateway' or application_name like 'solver-%')`;
    await pgAdmin.end({ timeout: 5 });
    expect(new Set(sessions.filter((x) => x.app === "gateway").map((x) => x.usename))).toEqual(
      new Set([pgCreds.gateway.user]),
    );
    expect(new Set(sessions.filter((x) => x.app.startsWith("solver-")).map((x) => x.usename))).toEqual(
      new Set([pgCreds.solver.user]),
    );
    const anonymous = postgres({
      host: "127.0.0.1",
      port: ports.pg,
      database: "pipeline",
      user: "postgres",
      max: 1,
      onnotice: () => {},
      connect_timeout: 10,
    });
    expect(
      await anonymous`select 1`.then(
        () => "connected",
        () => "refused",
      ),
    ).toBe("refused");
    await anonymous.end({ timeout: 1 }).catch(() => {});
    const a = assessAgainstDev(dataDir);
    expect(a.out).toMatch(/ok\s+nats\s+nats-server 2\.\d+\.\d+ at nats:\/\/127\.0\.0\.1:/);
    expect(a.out).toMatch(/ok\s+postgres\s+PostgreSQL/);
    expect(a.out).not.toContain("NEEDS A HUMAN: DATABASE_URL");
    await dev.stop();

    const again = await runDev("npm", dataDir, ports);
    const reread = (await (
      await fetch(`http://127.0.0.1:${ports.gateway}/v1/tasks/${id}`, { headers: auth })
    ).json()) as TaskView;
    expect(reread.status).toBe("completed");
    expect(reread.result!.token).toBe(view.result!.token);
    await again.stop();
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 240_000);
