// A request without a Host header (HTTP/1.0, HAProxy's default health check) reaches /readyz:
// Bun gives such a request a relative url ("/readyz"), which Hono read as the path "z".
import { afterAll, describe, expect, test } from "bun:test";
import type { GatewayDeps } from "../deps.ts";
import { withAbsoluteUrl } from "./absolute-url.ts";
import { healthRoutes } from "./health.ts";

const health = healthRoutes({
  store: {} as GatewayDeps["store"],
  queue: {} as GatewayDeps["queue"],
  readiness: { check: async () => ({ ready: true, nats: "ok", postgres: "ok" }) },
});
health.post("/echo", async (c) => c.text(`${c.req.path} ${await c.req.text()}`));
const fixed = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: withAbsoluteUrl(health.fetch) });
const bare = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: health.fetch });
afterAll(() => {
  fixed.stop(true);
  bare.stop(true);
});

/** One raw request over TCP; the status line and the body of the answer. */
async function raw(port: number, request: string): Promise<{ status: string; body: string }> {
  const text = await new Promise<string>((resolve, reject) => {
    let buf = "";
    const timer = setTimeout(() => resolve(buf), 3000);
    Bun.connect({
      hostname: "127.0.0.1",
      port,
      socket: {
        open: (s) => void s.write(request),
        data: (_s, d) => void (buf += d.toString()),
        close: () => {
          clearTimeout(timer);
          resolve(buf);
        },
        error: (_s, e) => reject(e),
      },
    });
  });
  return { status: text.split("\r\n")[0]!, body: text.slice(text.indexOf("\r\n\r\n") + 4) };
}

describe("a request without a Host header", () => {
  test("the cause: Bun's relative url made Hono route GET /readyz as the path z", async () => {
    const r = await raw(bare.port!, "GET /readyz HTTP/1.0\r\n\r\n");
    expect(r.status).toBe("HTTP/1.1 404 Not Found");
  });

  test("HTTP/1.0 GET /readyz without Host answers 200 ready", async () => {
    const r = await raw(fixed.port!, "GET /readyz HTTP/1.0\r\n\r\n");
    expect(r.status).toBe("HTTP/1.1 200 OK");
    expect(JSON.parse(r.body)).toEqual({ status: "ready", nats: "ok", postgres: "ok" });
  });

  test("with a Host header nothing changes; a body and a query survive the new URL", async () => {
    const withHost = await raw(fixed.port!, "GET /readyz HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n");
    expect(withHost.status).toBe("HTTP/1.1 200 OK");
    const post = await raw(fixed.port!, "POST /echo?x=1 HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello");
    expect(post).toEqual({ status: "HTTP/1.1 200 OK", body: "/echo hello" });
  });
});

describe("/readyz/accepting: the load balancers' check", () => {
  const routes = (ready: boolean, allows?: boolean) =>
    healthRoutes({
      store: {} as GatewayDeps["store"],
      queue: {} as GatewayDeps["queue"],
      readiness: { check: async () => ({ ready, nats: "ok", postgres: ready ? "ok" : "down" }) },
      ...(allows === undefined ? {} : { fence: { allows: () => allows } }),
    });
  const get = async (r: ReturnType<typeof routes>, path: string) => {
    const res = await r.request(path);
    return [res.status, ((await res.json()) as { status: string }).status];
  };

  test("accepting when ready and not fenced; 503 fenced or not ready; /readyz ignores the fence", async () => {
    expect(await get(routes(true), "/readyz/accepting")).toEqual([200, "accepting"]);
    expect(await get(routes(true, true), "/readyz/accepting")).toEqual([200, "accepting"]);
    expect(await get(routes(true, false), "/readyz/accepting")).toEqual([503, "fenced"]);
    expect(await get(routes(false, true), "/readyz/accepting")).toEqual([503, "not ready"]);
    // The deploy's check: a fenced region's gateway is still ready (a deploy is not rolled back for it).
    expect(await get(routes(true, false), "/readyz")).toEqual([200, "ready"]);
  });
});
