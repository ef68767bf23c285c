import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

export { Counter, Gauge, Histogram, Registry };

/** A registry of one app's metrics, with the process metrics (RSS, CPU, event loop lag) and an `app` label. */
export function createRegistry(app: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ app });
  collectDefaultMetrics({ register: registry });
  // prom-client names these gauges `_total`, which promtool rejects; the resource counts stay.
  for (const name of ["nodejs_active_handles_total", "nodejs_active_requests_total", "nodejs_active_resources_total"])
    registry.removeSingleMetric(name);
  return registry;
}

/** The Prometheus text exposition of a registry, as an HTTP response. */
export async function metricsResponse(registry: Registry): Promise<Response> {
  return new Response(await registry.metrics(), { headers: { "content-type": registry.contentType } });
}

/** Solve-time buckets: provider solves take 5-60 s, the emulator in tests far less. */
export const SOLVE_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 30, 45, 60, 90, 120, 300];
export const HTTP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
