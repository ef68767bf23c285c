// Debian's Prometheus and Alertmanager (bookworm: 2.42 and 0.25), unpacked into the project's
// .data/tools/debian by @pipeline/devstack (nothing installed on the system): for checking
// rendered configs and for the alert delivery test. The monitoring host runs the same packages.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { debianPackages } from "@pipeline/devstack";

export interface PrometheusTools {
  /** The unpacked packages' root (it holds usr/share/prometheus). */
  root: string;
  prometheus: string;
  promtool: string;
  alertmanager: string;
  amtool: string;
}

/** The four binaries (fetched on first use). */
export function prometheusTools(log?: (m: string) => void): PrometheusTools {
  const root = debianPackages("prometheus", ["prometheus", "prometheus-alertmanager"], log).root;
  const bin = join(root, "usr", "bin");
  return {
    root,
    prometheus: join(bin, "prometheus"),
    promtool: join(bin, "promtool"),
    alertmanager: join(bin, "prometheus-alertmanager"),
    amtool: join(bin, "amtool"),
  };
}

export interface ToolProcess {
  url: string;
  port: number;
  pid: number | undefined;
  logFile: string;
  stop(): Promise<void>;
}

const tail = (file: string) => readFileSync(file, "utf8").trim().split("\n").slice(-3).join("\n");

async function waitReady(url: string, child: ChildProcess, logFile: string, readyPath: string, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${url}: exited with ${child.exitCode}: ${tail(logFile)}`);
    try {
      if ((await fetch(`${url}${readyPath}`, { signal: AbortSignal.timeout(1000) })).ok) return;
    } catch {}
    await Bun.sleep(200);
  }
  throw new Error(`${url} not ready within ${timeoutMs} ms: ${tail(logFile)}`);
}

function startTool(
  bin: string,
  args: string[],
  port: number,
  logFile: string,
  o: { readyPath?: string; env?: Record<string, string> } = {},
): Promise<ToolProcess> {
  const out = openSync(logFile, "a");
  const child = spawn(bin, args, { stdio: ["ignore", out, out], env: { ...process.env, ...o.env } });
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    await exited;
  };
  return waitReady(url, child, logFile, o.readyPath ?? "/-/ready").then(
    () => ({ url, port, pid: child.pid, logFile, stop }),
    async (err) => {
      await stop();
      throw err;
    },
  );
}

/** Debian's prometheus on 127.0.0.1:port with `configFile` (its rule files relative to it), its TSDB in dataDir; resolves once /-/ready. */
export function startPrometheus(o: { configFile: string; dataDir: string; port: number; log?: (m: string) => void }) {
  const t = prometheusTools(o.log);
  mkdirSync(o.dataDir, { recursive: true });
  return startTool(
    t.prometheus,
    [
      `--config.file=${o.configFile}`,
      `--storage.tsdb.path=${o.dataDir}`,
      `--web.listen-address=127.0.0.1:${o.port}`,
      "--web.enable-lifecycle",
    ],
    o.port,
    join(o.dataDir, "prometheus.log"),
  );
}

/**
 * Debian's alertmanager on 127.0.0.1:port, clustering off; resolves once /-/ready. Debian's build
 * reads its default notification templates from /usr/share/prometheus/alertmanager, which the
 * unpacked package does not put there: it runs in a mount namespace of its own (root, `unshare -m`)
 * where the package's usr/share is laid over /usr/share (a read-only overlay, seen by it alone).
 */
export function startAlertmanager(o: { configFile: string; dataDir: string; port: number; log?: (m: string) => void }) {
  const t = prometheusTools(o.log);
  mkdirSync(o.dataDir, { recursive: true });
  const args = [
    `--config.file=${o.configFile}`,
    `--storage.path=${o.dataDir}`,
    `--web.listen-address=127.0.0.1:${o.port}`,
    "--cluster.listen-address=",
  ];
  const overlay = `mount -t overlay overlay -o lowerdir=${join(t.root, "usr", "share")}:/usr/share /usr/share && exec "$0" "$@"`;
  const [bin, argv] =
    process.getuid?.() === 0
      ? ["unshare", ["-m", "sh", "-c", overlay, t.alertmanager, ...args]]
      : [t.alertmanager, args];
  return startTool(bin, argv, o.port, join(o.dataDir, "alertmanager.log"));
}

/** Debian's node and postgres exporters (bookworm: 1.5 and 0.11), unpacked beside the others. */
export function exporterTools(log?: (m: string) => void): { nodeExporter: string; postgresExporter: string } {
  const bin = join(
    debianPackages("prometheus-exporters", ["prometheus-node-exporter", "prometheus-postgres-exporter"], log).root,
    "usr",
    "bin",
  );
  return {
    nodeExporter: join(bin, "prometheus-node-exporter"),
    postgresExporter: join(bin, "prometheus-postgres-exporter"),
  };
}

/** Debian's node exporter on 127.0.0.1:port (a host's metrics: HostDown when it stops answering). */
export function startNodeExporter(o: { dataDir: string; port: number; log?: (m: string) => void }) {
  mkdirSync(o.dataDir, { recursive: true });
  return startTool(
    exporterTools(o.log).nodeExporter,
    [`--web.listen-address=127.0.0.1:${o.port}`, `--collector.textfile.directory=${o.dataDir}`],
    o.port,
    join(o.dataDir, "node-exporter.log"),
    { readyPath: "/metrics" },
  );
}

/** Debian's postgres exporter on 127.0.0.1:port for the server at `url` (a secret: passed in its environment). */
export function startPostgresExporter(o: { dataDir: string; port: number; url: string; log?: (m: string) => void }) {
  mkdirSync(o.dataDir, { recursive: true });
  return startTool(
    exporterTools(o.log).postgresExporter,
    [`--web.listen-address=127.0.0.1:${o.port}`],
    o.port,
    join(o.dataDir, "postgres-exporter.log"),
    { readyPath: "/metrics", env: { DATA_SOURCE_NAME: o.url } },
  );
}
