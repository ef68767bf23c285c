import { spawn } from "node:child_process";
import { mkdtempSync, openSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, waitForPort } from "@pipeline/devstack";
import type { Scope } from "./scope.ts";

/**
 * A redis-server of the bench's own on 127.0.0.1 and a free port, persisting as BullMQ users are
 * told to (AOF, fsync every second, no RDB snapshots), its files in a temp folder.
 */
export async function startRedis(scope: Scope): Promise<{ port: number; pid: number }> {
  const bin = process.env.REDIS_SERVER_BIN ?? "/usr/bin/redis-server";
  const dir = mkdtempSync(join(tmpdir(), "pipeline-bench-redis-"));
  scope.defer("redis data", async () => rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  const out = openSync(join(dir, "redis.log"), "a");
  const args = [
    "--bind",
    "127.0.0.1",
    "--port",
    String(port),
    "--appendonly",
    "yes",
    "--appendfsync",
    "everysec",
    "--dir",
    dir,
    "--save",
    "",
    "--daemonize",
    "no",
  ];
  const child = spawn(bin, args, { stdio: ["ignore", out, out] });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  scope.defer("redis-server", async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    await exited;
  });
  await waitForPort(port, 10_000);
  return { port, pid: child.pid! };
}
