// A webhook that records what Alertmanager sends in Slack's format (slack_configs), with the time
// each arrived: the far end of an alert drill. `bun infra/monitoring/alert-receiver.ts [--port 9099]`
// prints "alert <name> after S s" per notification; POST /mark restarts the clock (at the fault).
import { describeIssues } from "@pipeline/shared/schemas";
import { z } from "zod";

/** The part of a Slack incoming-webhook body Alertmanager's slack_configs fills in. */
export const SlackMessage = z.object({
  channel: z.string().optional(),
  username: z.string().optional(),
  text: z.string().optional(),
  attachments: z
    .array(z.object({ title: z.string(), text: z.string().optional(), fallback: z.string().optional() }))
    .min(1),
});
export type SlackMessage = z.infer<typeof SlackMessage>;

export interface ReceivedAlert {
  /** The alert's name, read from the title infra/monitoring/alertmanager-config.ts renders ("[FIRING:1] AppDown"). */
  name: string;
  status: "firing" | "resolved";
  /** How many alerts the notification groups ("[FIRING:2]"). */
  count: number;
  title: string;
  text: string;
  receivedAt: Date;
  /** Milliseconds since the receiver started or since the last mark. */
  afterMs: number;
  body: SlackMessage;
}

export interface AlertReceiver {
  /** Where Alertmanager posts: ALERT_WEBHOOK_URL. */
  url: string;
  port: number;
  alerts: ReceivedAlert[];
  /** Restarts the clock `afterMs` counts from (call it when the fault is injected). */
  mark(): void;
  /** The first notification (since the last mark) of `name` with `status`; rejects after timeoutMs. */
  waitFor(name: string, o?: { status?: "firing" | "resolved"; timeoutMs?: number }): Promise<ReceivedAlert>;
  stop(): Promise<void>;
}

const TITLE = /^\[(FIRING|RESOLVED)(?::(\d+))?\] (\S+)/;

/** Reads one notification; throws naming the field at fault. */
export function readSlackAlert(body: unknown, receivedAt: Date, afterMs: number): ReceivedAlert {
  const r = SlackMessage.safeParse(body);
  if (!r.success) throw new Error(describeIssues(r.error));
  const a = r.data.attachments[0]!;
  const m = TITLE.exec(a.title);
  if (!m) throw new Error(`attachments.0.title: not "[FIRING:n] <alertname>" or "[RESOLVED] <alertname>"`);
  return {
    name: m[3]!,
    status: m[1] === "FIRING" ? "firing" : "resolved",
    count: Number(m[2] ?? 1),
    title: a.title,
    text: a.text ?? "",
    receivedAt,
    afterMs,
    body: r.data,
  };
}

/** Listens on host:port (0 = a free port): POST any path = a notification, POST /mark, GET /alerts. */
export function startAlertReceiver(
  o: { host?: string; port?: number; onAlert?: (a: ReceivedAlert) => void } = {},
): AlertReceiver {
  const alerts: ReceivedAlert[] = [];
  let t0 = performance.now();
  let markIndex = 0;
  const waiters = new Set<() => void>();
  const server = Bun.serve({
    hostname: o.host ?? "127.0.0.1",
    port: o.port ?? 0,
    async fetch(req) {
      const path = new URL(req.url).pathname;
      if (req.method === "GET" && path === "/alerts") return Response.json(alerts);
      if (req.method !== "POST") return new Response("method not allowed\n", { status: 405 });
      if (path === "/mark") {
        t0 = performance.now();
        markIndex = alerts.length;
        return new Response("ok\n");
      }
      let alert: ReceivedAlert;
      try {
        alert = readSlackAlert(await req.json(), new Date(), performance.now() - t0);
      } catch (err) {
        return new Response(`${(err as Error).message}\n`, { status: 400 });
      }
      alerts.push(alert);
      o.onAlert?.(alert);
      for (const w of waiters) w();
      return new Response("ok");
    },
  });
  const host = o.host ?? "127.0.0.1";
  return {
    url: `http://${host}:${server.port}/alerts/hook`,
    port: server.port!,
    alerts,
    mark() {
      t0 = performance.now();
      markIndex = alerts.length;
    },
    waitFor(name, w = {}) {
      const status = w.status ?? "firing";
      const from = markIndex;
      const find = () => alerts.slice(from).find((a) => a.name === name && a.status === status);
      return new Promise((resolve, reject) => {
        const check = () => {
          const a = find();
          if (!a) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(a);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          const got = alerts.slice(from).map((a) => `${a.status} ${a.name}`);
          reject(
            new Error(
              `no ${status} ${name} within ${w.timeoutMs ?? 180_000} ms (received: ${got.join(", ") || "nothing"})`,
            ),
          );
        }, w.timeoutMs ?? 180_000);
        waiters.add(check);
        check();
      });
    },
    stop: () => server.stop(true),
  };
}

/** "alert AppDown after 73.2 s (firing, 1: ...)". */
export function describeReceived(a: ReceivedAlert): string {
  const what = a.status === "firing" ? "alert" : "resolved";
  return `${what} ${a.name} after ${(a.afterMs / 1000).toFixed(1)} s (${a.status}, ${a.count}: ${a.text.trim().split("\n")[0] ?? ""})`;
}

if (import.meta.main) {
  const arg = (name: string) => {
    const i = process.argv.indexOf(name);
    return i > 0 ? process.argv[i + 1] : undefined;
  };
  const r = startAlertReceiver({
    host: arg("--host") ?? "127.0.0.1",
    port: Number(arg("--port") ?? 9099),
    onAlert: (a) => console.log(describeReceived(a)),
  });
  console.log(`alert receiver on ${r.url} (ALERT_WEBHOOK_URL); POST /mark restarts the clock, GET /alerts lists them`);
  process.on("SIGTERM", () => void r.stop().then(() => process.exit(0)));
  process.on("SIGINT", () => void r.stop().then(() => process.exit(0)));
}
