// The exporter's HTTP side: GET /metrics (one scrape of a monitoring port per request), GET /healthz.
import { EXPOSITION_CONTENT_TYPE, renderExposition } from "./exposition.ts";
import { type MonitorSnapshot, natsMetrics } from "./nats-metrics.ts";

export interface ExporterDeps {
  /** The monitoring base URLs this exporter may read (`http://host:port`). */
  monitorUrls: string[];
  scrape(baseUrl: string): Promise<MonitorSnapshot>;
  /** A pino logger, or anything with its (object, message) calls. */
  log: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };
}

/** `host:port` of a `?target=` value, given with or without a scheme. */
function targetKey(t: string): string | undefined {
  try {
    return new URL(t.includes("://") ? t : `http://${t}`).host;
  } catch {
    return undefined;
  }
}

/**
 * The request handler. `/metrics` reads the one configured server, or the one `?target=host:port`
 * names among them (any other target is refused: the exporter fetches no address it was not
 * given). A failing endpoint is logged once when its reason changes, not at every scrape.
 */
export function exporterHandler(deps: ExporterDeps): (req: Request) => Promise<Response> {
  const byHost = new Map(deps.monitorUrls.map((u) => [new URL(u).host, u]));
  const lastError = new Map<string, string | undefined>();
  const note = (base: string, s: MonitorSnapshot) => {
    for (const e of ["varz", "jsz", "healthz"] as const) {
      const key = `${base} ${e}`;
      const now = s.errors[e];
      if (lastError.get(key) === now) continue;
      lastError.set(key, now);
      if (now) deps.log.warn({ target: base, endpoint: e, reason: now }, "nats monitoring endpoint failed");
      else deps.log.info({ target: base, endpoint: e }, "nats monitoring endpoint answers");
    }
  };
  return async (req) => {
    const url = new URL(req.url);
    if (req.method !== "GET") return new Response("method not allowed\n", { status: 405 });
    if (url.pathname === "/healthz") return new Response("ok\n");
    if (url.pathname !== "/metrics") return new Response("not found\n", { status: 404 });
    const target = url.searchParams.get("target");
    let base: string | undefined;
    if (target === null) {
      if (byHost.size > 1)
        return new Response("several servers configured: name one with ?target=host:port\n", { status: 400 });
      base = deps.monitorUrls[0];
    } else {
      const key = targetKey(target);
      base = key ? byHost.get(key) : undefined;
      if (!base) return new Response("target is not one of NATS_MONITOR_URLS\n", { status: 400 });
    }
    const snapshot = await deps.scrape(base!);
    note(base!, snapshot);
    return new Response(renderExposition(natsMetrics(snapshot)), {
      headers: { "content-type": EXPOSITION_CONTENT_TYPE },
    });
  };
}

export interface RunningExporter {
  url: string;
  port: number;
  stop(): Promise<void>;
}

/** Listens on host:port (0 = a free port) with `exporterHandler`. */
export function startExporter(deps: ExporterDeps & { host: string; port: number }): RunningExporter {
  const server = Bun.serve({ hostname: deps.host, port: deps.port, fetch: exporterHandler(deps) });
  const port = server.port!;
  return {
    url: `http://${deps.host.includes(":") ? `[${deps.host}]` : deps.host}:${port}`,
    port,
    stop: () => server.stop(true),
  };
}
