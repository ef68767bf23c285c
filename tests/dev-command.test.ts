import { expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, portInUse } from "@pipeline/shared/localstack";
import { eventually } from "@pipeline/shared/testing";
import type { TaskView } from "@pipeline/shared/schemas";
import { ROOT } from "./harness.ts";

/** `npm run dev` as a user runs it: NATS and Postgres of its own, the emulator, gateway and solver. */
async function runDev(dataDir: string, ports: Record<string, number>) {
  const env: Record<string, string | undefined> = {
    ...process.env,
    DATA_DIR: dataDir,
    NATS_PORT: String(ports.nats),
    PG_PORT: String(ports.pg),
    GATEWAY_PORT: String(ports.gateway),
    EMULATOR_PORT: String(ports.emulator),
    EMULATOR_LATENCY_MS: "200",
    METRICS_PORT: String(ports.metrics),
  };
  delete env.DATABASE_URL;
  delete env.NATS_URL;
  delete env.TEST_PG_ADMIN_URL;
  let out = "";
  const child = spawn("npm", ["run", "dev"], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
  child.stdout!.on("data", (b) => (out += b));
  child.stderr!.on("data", (b) => (out += b));
  const exited = new Promise<{ code: number | null; signal: string | null }>((r) => child.on("exit", (code, signal) => r({ code, signal })));
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
    },
  };
}

const auth = { authorization: "Bearer dev-key", "content-type": "application/json" };

test("npm run dev serves a task end to end, stops cleanly on Ctrl-C, and a second start keeps the data", async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "pipeline-dev-"));
  const ports = { nats: await freePort(), pg: await freePort(), gateway: await freePort(), emulator: await freePort(), metrics: await freePort() };
  try {
    const dev = await runDev(dataDir, ports);
    const sub = await fetch(`http://127.0.0.1:${ports.gateway}/v1/tasks`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ type: "turnstile", params: { sitekey: "0x4AAAAAAA", pageurl: "https://example.com/login" } }),
    });
    expect(sub.status).toBe(202);
    const { id } = (await sub.json()) as { id: string };
    const view = (await (await fetch(`http://127.0.0.1:${ports.gateway}/v1/tasks/${id}?wait=30`, { headers: auth })).json()) as TaskView;
    expect(view.status).toBe("completed");
    expect(view.result!.token.length).toBeGreaterThan(10);
    expect(dev.output()).toContain("API key: dev-key");
    await dev.stop();

    const again = await runDev(dataDir, ports);
    const reread = (await (await fetch(`http://127.0.0.1:${ports.gateway}/v1/tasks/${id}`, { headers: auth })).json()) as TaskView;
    expect(reread.status).toBe("completed");
    expect(reread.result!.token).toBe(view.result!.token);
    await again.stop();
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 240_000);
