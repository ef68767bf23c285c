// The one file that talks to nats-server: GETs of its monitoring endpoints.
import { MONITOR_ENDPOINTS, type MonitorEndpoint, parseMonitorJson } from "./monitor-json.ts";
import type { MonitorSnapshot } from "./nats-metrics.ts";

export interface ScrapeOptions {
  timeoutMs: number;
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
}

async function readEndpoint(baseUrl: string, e: MonitorEndpoint, o: ScrapeOptions): Promise<unknown> {
  const res = await (o.fetch ?? fetch)(`${baseUrl}${MONITOR_ENDPOINTS[e].path}`, {
    signal: AbortSignal.timeout(o.timeoutMs),
  });
  // /healthz answers 503 with a JSON reason when JetStream is not current: that is an answer.
  if (res.status !== 200 && !(e === "healthz" && res.status === 503)) {
    await res.body?.cancel();
    throw new Error(`HTTP ${res.status}`);
  }
  const text = await res.text();
  try {
    return JSON.parse(text);
  } catch {
    throw new Error("body is not JSON");
  }
}

/** Reads `/varz`, `/jsz` and `/healthz` of one server at once; an endpoint that fails is named in `errors`, never thrown. */
export async function scrapeMonitor(baseUrl: string, o: ScrapeOptions): Promise<MonitorSnapshot> {
  const snapshot: MonitorSnapshot = { errors: {} };
  await Promise.all(
    (Object.keys(MONITOR_ENDPOINTS) as MonitorEndpoint[]).map(async (e) => {
      try {
        const body = await readEndpoint(baseUrl, e, o);
        if (e === "varz") snapshot.varz = parseMonitorJson("varz", body);
        else if (e === "jsz") snapshot.jsz = parseMonitorJson("jsz", body);
        else snapshot.healthz = parseMonitorJson("healthz", body);
      } catch (err) {
        snapshot.errors[e] = err instanceof Error ? err.message : String(err);
      }
    }),
  );
  return snapshot;
}
