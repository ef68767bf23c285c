import { createServer, Socket } from "node:net";

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
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
