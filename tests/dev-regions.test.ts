// `npm run dev -- --regions 2` as a user starts it: both regions (each its own nats-server and
// JetStream domain, database, gateway, solver, recovery), the witness and the emulator on one
// machine. A task submitted to each region completes at home and replicates to the other, whose
// gateway answers its read; Ctrl-C leaves nothing running and no port taken.
import { expect, test } from "bun:test";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, portInUse } from "@pipeline/devstack";
import { eventually } from "@pipeline/devstack/testing";
import type { TaskView } from "@pipeline/shared/schemas";
import { ROOT } from "./harness.ts";

/** A free port whose `n - 1` next ports are free too (the stack takes consecutive ones). */
async function freeRun(n: number): Promise<number> {
  for (;;) {
    const p = await freePort();
    if (p + n > 65535) continue;
    let ok = true;
    for (let i = 1; i < n; i++) if (await portInUse(p + i)) ok = false;
    if (ok) return p;
  }
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

const auth = { authorization: "Bearer dev-key", "content-type": "application/json" };

test("npm run dev -- --regions 2: both gateways printed, a task through each completes and replicates, Ctrl-C leaves nothing", async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "pipeline-dev-regions-"));
  const ports = {
    gateway: await freeRun(2),
    nats: await freeRun(3),
    leaf: await freePort(),
    pg: await freePort(),
    emulator: await freePort(),
    metrics: await freeRun(2),
  };
  const all = [
    ports.gateway,
    ports.gateway + 1,
    ports.nats,
    ports.nats + 1,
    ports.nats + 2,
    ports.leaf,
    ports.pg,
    ports.emulator,
    ports.metrics,
    ports.metrics + 1,
  ];
  const env: Record<string, string | undefined> = {
    ...process.env,
    DATA_DIR: dataDir,
    GATEWAY_PORT: String(ports.gateway),
    NATS_PORT: String(ports.nats),
    LEAF_PORT: String(ports.leaf),
    PG_PORT: String(ports.pg),
    EMULATOR_PORT: String(ports.emulator),
    EMULATOR_LATENCY_MS: "200",
    METRICS_PORT: String(ports.metrics),
  };
  for (const k of ["DATABASE_URL", "NATS_URL", "TEST_PG_ADMIN_URL", "REGION", "REGIONS", "API_KEYS"]) delete env[k];
  let out = "";
  const child = spawn("npm", ["run", "dev", "--", "--regions", "2"], {
    cwd: ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  child.stdout!.on("data", (b) => (out += b));
  child.stderr!.on("data", (b) => (out += b));
  const exited = new Promise<{ code: number | null; signal: string | null }>((r) =>
    child.on("exit", (code, signal) => r({ code, signal })),
  );
  let failed = false;
  const gateways = { fsn1: `http://127.0.0.1:${ports.gateway}`, hel1: `http://127.0.0.1:${ports.gateway + 1}` };
  try {
    await eventually(() => out.includes(`hel1 gateway  ${gateways.hel1}`), 120_000, 250).catch((e) => {
      throw new Error(`${(e as Error).message}\n--- dev output ---\n${out.slice(-4000)}`);
    });
    expect(out).toContain(`fsn1 gateway  ${gateways.fsn1}   (API key: dev-key`);
    expect(out).toContain(`witness       nats://127.0.0.1:${ports.nats + 2}`);

    // One task through each region's gateway (accepted once that region holds its lease).
    const ids: Record<string, string> = {};
    for (const [region, url] of Object.entries(gateways)) {
      ids[region] = await eventually(
        async () => {
          const res = await fetch(`${url}/v1/tasks`, {
            method: "POST",
            headers: auth,
            body: JSON.stringify({
              type: "turnstile",
              params: { sitekey: "0x4AAAAAAA", pageurl: `https://example.com/${region}` },
            }),
          });
          return res.status === 202 ? ((await res.json()) as { id: string }).id : undefined;
        },
        60_000,
        250,
      );
    }
    for (const [region, url] of Object.entries(gateways)) {
      const view = (await (
        await fetch(`${url}/v1/tasks/${ids[region]}?wait=30`, { headers: auth })
      ).json()) as TaskView;
      expect(view.status).toBe("completed");
      expect(view.result!.token.length).toBeGreaterThan(10);
    }
    // Each task replicates to the other region, whose gateway answers its read: the replica row
    // holds no token, the gateway asks the home's gateways for it (docs/regions.md).
    for (const [region, other] of [
      ["fsn1", "hel1"],
      ["hel1", "fsn1"],
    ] as const) {
      const away = await eventually(
        async () => {
          const res = await fetch(`${gateways[other]}/v1/tasks/${ids[region]}`, { headers: auth });
          const v = res.status === 200 ? ((await res.json()) as TaskView) : undefined;
          return v?.completedAt ? v : undefined;
        },
        30_000,
        250,
      );
      expect(away.id).toBe(ids[region]!);
      expect(away.status).toBe("completed");
      expect(away.result!.token.length).toBeGreaterThan(10);
    }
    const stats = (await (await fetch(`http://127.0.0.1:${ports.emulator}/emulator/stats`)).json()) as {
      submissions: number;
    };
    expect(stats.submissions).toBe(2);
  } catch (err) {
    // The real failure, with what `npm run dev` said (it may have exited on its own: the stop
    // below then finds no process group, which must not hide this).
    failed = true;
    throw new Error(`${(err as Error).message}\n--- dev output ---\n${out.slice(-4000)}`);
  } finally {
    // Ctrl-C in a terminal: SIGINT to the whole foreground process group.
    try {
      process.kill(-child.pid!, "SIGINT");
    } catch {
      // Already gone (ESRCH): the exit below says how it ended.
    }
    const { code, signal } = await Promise.race([
      exited,
      Bun.sleep(60_000).then(() => ({ code: null, signal: "not stopped in 60 s" })),
    ]);
    if (failed) {
      // Best effort, and never a second error in place of the first.
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {}
    } else {
      expect(`${code} ${signal}`).toMatch(/^(0 null|null SIGINT)$/);
      for (const p of all) await eventually(async () => !(await portInUse(p)), 30_000, 100);
      await eventually(() => out.includes("[dev] stopped"), 30_000, 100);
      await eventually(() => leftovers(dataDir, child.pid!).length === 0, 30_000, 200).catch(() => {
        throw new Error(`processes left behind:\n${leftovers(dataDir, child.pid!).join("\n")}`);
      });
      expect(existsSync(join(dataDir, "regions", "fsn1", "nats"))).toBe(true);
    }
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 240_000);
