import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, openSync } from "node:fs";
import { join } from "node:path";
import { findNatsServer } from "./binaries.ts";
import { waitForPort } from "./free-port.ts";

export interface NatsServerOptions {
  port: number;
  storeDir: string;
  name?: string;
  log?: (m: string) => void;
}

export interface NatsServerHandle {
  url: string;
  port: number;
  pid(): number | undefined;
  /** SIGTERM and wait for exit. */
  stop(): Promise<void>;
  /** SIGKILL: a crash, not a shutdown. */
  kill(): Promise<void>;
  /** Starts it again on the same port and store. */
  start(): Promise<void>;
}

/** Runs a nats-server with JetStream on 127.0.0.1:port, its store and log under storeDir. */
export async function startNatsServer(o: NatsServerOptions): Promise<NatsServerHandle> {
  const bin = findNatsServer(o.log);
  mkdirSync(o.storeDir, { recursive: true });
  let child: ChildProcess | undefined;
  const exited = () =>
    new Promise<void>((res) => {
      if (!child || child.exitCode !== null || child.signalCode !== null) return res();
      child.once("exit", () => res());
    });
  const start = async () => {
    const out = openSync(join(o.storeDir, "nats-server.log"), "a");
    child = spawn(bin, ["-a", "127.0.0.1", "-p", String(o.port), "-js", "-sd", o.storeDir, "-n", o.name ?? `nats-${o.port}`], {
      stdio: ["ignore", out, out],
    });
    child.unref();
    await waitForPort(o.port, 15_000);
  };
  await start();
  const signal = async (sig: NodeJS.Signals) => {
    const done = exited();
    child?.kill(sig);
    await done;
  };
  return {
    url: `nats://127.0.0.1:${o.port}`,
    port: o.port,
    pid: () => child?.pid,
    stop: () => signal("SIGTERM"),
    kill: () => signal("SIGKILL"),
    start,
  };
}
