import { closeSync, mkdirSync, openSync, statSync, unlinkSync } from "node:fs";
import { createServer, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** How long a port handed out stays reserved for its taker, machine-wide. */
const RESERVED_MS = 120_000;
const RESERVATIONS = join(tmpdir(), "pipeline-free-ports");

/**
 * Reserves the port for RESERVED_MS across every process on the machine (a file created
 * exclusively): the kernel may hand the same free port to two processes that each ask for one
 * before either listens on it (two test processes run side by side; a test and the dev stack it
 * starts), and both would then start a server on it.
 */
export function reservePort(port: number, now = Date.now()): boolean {
  const file = join(RESERVATIONS, String(port));
  mkdirSync(RESERVATIONS, { recursive: true });
  try {
    closeSync(openSync(file, "wx"));
    return true;
  } catch {
    try {
      if (now - statSync(file).mtimeMs < RESERVED_MS) return false;
      unlinkSync(file); // an old reservation: its taker has long started (or given up)
      closeSync(openSync(file, "wx"));
      return true;
    } catch {
      return false;
    }
  }
}

/**
 * Where ports are drawn from: below Linux's ephemeral range (32768-60999), which the kernel also
 * hands to every outgoing connection's local end. A port from that range can be taken by some
 * client socket between the pick and the listen (a dev stack's gateway failed so in CI); one from
 * here only by another listener, which the reservation covers.
 */
const LOW_PORT = 20_000;
const HIGH_PORT = 32_000;

/** A TCP port on 127.0.0.1 that was free a moment ago, handed to no other caller on this machine in the last 2 minutes. */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const candidate = LOW_PORT + Math.floor(Math.random() * (HIGH_PORT - LOW_PORT));
    const port = await listenOnce(candidate).catch(() => undefined);
    if (port !== undefined && reservePort(port)) return port;
  }
  // The low range crowded: any port the kernel gives.
  for (let i = 0; ; i++) {
    const port = await listenOnce(0);
    if (reservePort(port) || i >= 20) return port;
  }
}

/** Listens on `port` (0: any) on 127.0.0.1 and closes at once: the port it got. */
function listenOnce(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(port, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** Resolves once something accepts TCP connections on the port, or rejects after `timeoutMs`. */
export async function waitForPort(port: number, timeoutMs = 15_000, host = "127.0.0.1"): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((res) => {
      const s = new Socket();
      s.setTimeout(500);
      s.once("connect", () => (s.destroy(), res(true)));
      s.once("error", () => (s.destroy(), res(false)));
      s.once("timeout", () => (s.destroy(), res(false)));
      s.connect(port, host);
    });
    if (ok) return;
    if (Date.now() > until) throw new Error(`nothing listens on ${host}:${port} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** True when the port accepts connections now. */
export async function portInUse(port: number, host = "127.0.0.1"): Promise<boolean> {
  return waitForPort(port, 0, host).then(
    () => true,
    () => false,
  );
}
