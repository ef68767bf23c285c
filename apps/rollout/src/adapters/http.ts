// The rollout service's operator-side listener: the JSON status (GET /v1/rollout) and the metrics
// (GET /metrics). Off unless a port is set; not behind the public load balancer.
import type { RolloutStatus } from "../controller.ts";

export interface StatusListener {
  hostname: string | undefined;
  port: number | undefined;
  stop(): void;
}

/** Serves the controller's status and the metrics on `hostname:port` (port 0: any free one). */
export function startStatusListener(o: {
  hostname: string;
  port: number;
  status: () => RolloutStatus;
  metrics: () => Response | Promise<Response>;
}): StatusListener {
  const server = Bun.serve({
    hostname: o.hostname,
    port: o.port,
    fetch(req) {
      const path = new URL(req.url).pathname;
      if (req.method !== "GET") return new Response("method not allowed", { status: 405 });
      if (path === "/v1/rollout") return Response.json(o.status(), { headers: { "cache-control": "no-store" } });
      if (path === "/metrics") return o.metrics();
      return new Response("not found", { status: 404 });
    },
  });
  return { hostname: server.hostname, port: server.port, stop: () => server.stop(true) };
}
