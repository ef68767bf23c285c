// The rehearsal's failover name server: authoritative for the shared name's zone on the bridge
// (UDP), answering the load balancers that pass their health check (dns-failover.ts), as a DNS
// provider's health-checked failover records do in production (docs/deploy.md, "Clients and a
// lost region"). `up` starts it detached; its changes go to logs/dns.log and GET /status.
//
//   bun infra/rehearsal/dns-server.ts --host 10.77.0.1 --port 53 --status-port 18083 \
//     --zone rehearsal.test --name api.rehearsal.test --ca ca.pem --lb fsn1=10.77.1.5 --lb hel1=10.77.2.5
import { createSocket } from "node:dgram";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { z } from "zod";
import { answerOf, initialHealth, nextHealth, type Target } from "./dns-failover.ts";
import { parseQuestion, respond } from "./dns-wire.ts";

const Ip = z.ipv4();
const Args = z.object({
  host: Ip,
  port: z.coerce.number().int().min(1).max(65535),
  "status-port": z.coerce.number().int().min(1).max(65535),
  zone: z.string().regex(/^[a-z0-9-]+(\.[a-z0-9-]+)+$/),
  name: z.string().regex(/^[a-z0-9-]+(\.[a-z0-9-]+)+$/),
  ttl: z.coerce.number().int().min(1).max(3600).default(5),
  "interval-ms": z.coerce.number().int().min(100).max(60_000).default(1000),
  ca: z.string().min(1),
  // region=IPv4, or region=IPv4:port where the check goes to another port than 443 (tests).
  lb: z
    .array(z.string().regex(/^[a-z0-9_-]+=\d+\.\d+\.\d+\.\d+(:\d{1,5})?$/, "region=IPv4[:port]"))
    .min(1)
    .transform((xs) =>
      xs.map((x) => {
        const [region, at] = x.split("=") as [string, string];
        const [address, port] = at.split(":") as [string, string | undefined];
        return { region, address, port: port ? Number(port) : 443 };
      }),
    ),
});

function args() {
  const { values } = parseArgs({
    options: {
      host: { type: "string" },
      port: { type: "string" },
      "status-port": { type: "string" },
      zone: { type: "string" },
      name: { type: "string" },
      ttl: { type: "string" },
      "interval-ms": { type: "string" },
      ca: { type: "string" },
      lb: { type: "string", multiple: true },
    },
  });
  const parsed = Args.safeParse(values);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    console.error(`dns-server: --${issue.path.join(".")}: ${issue.message}`);
    process.exit(2);
  }
  if (!parsed.data.name.endsWith(`.${parsed.data.zone}`)) {
    console.error(`dns-server: --name ${parsed.data.name} is not in --zone ${parsed.data.zone}`);
    process.exit(2);
  }
  return parsed.data;
}

const a = args();
const ca = readFileSync(a.ca, "utf8");
let health = initialHealth(a.lb);
const changes: Array<{ at: string; region: string; inRotation: boolean; answer: string[] }> = [];
const stamp = () => new Date().toISOString();

/** The load balancer answers `/readyz/accepting` with 200, for the shared name's certificate. */
async function check(t: Target & { port: number }): Promise<boolean> {
  try {
    const res = await fetch(`https://${t.address}:${t.port}/readyz/accepting`, {
      headers: { host: a.name },
      signal: AbortSignal.timeout(Math.max(500, a["interval-ms"])),
      tls: { ca, serverName: a.name },
    } as RequestInit);
    await res.body?.cancel();
    return res.status === 200;
  } catch {
    return false;
  }
}

async function checkLoop(): Promise<void> {
  for (;;) {
    const started = Date.now();
    const results = await Promise.all(a.lb.map(async (t) => [t.region, await check(t)] as const));
    const before = health;
    health = nextHealth(health, Object.fromEntries(results), Date.now());
    for (const t of a.lb) {
      if (before[t.region]!.inRotation === health[t.region]!.inRotation) continue;
      const change = {
        at: stamp(),
        region: t.region,
        inRotation: health[t.region]!.inRotation,
        answer: answerOf(a.lb, health),
      };
      changes.push(change);
      console.log(
        `${change.at} dns: ${t.region} (${t.address}) ${change.inRotation ? "back in rotation" : "out of rotation"}; ${a.name} -> ${change.answer.join(", ")}`,
      );
    }
    await Bun.sleep(Math.max(0, a["interval-ms"] - (Date.now() - started)));
  }
}

const udp = createSocket("udp4");
udp.on("message", (msg, from) => {
  const q = parseQuestion(msg);
  if (!q) return;
  udp.send(respond(q, a.zone, a.name, answerOf(a.lb, health), a.ttl), from.port, from.address);
});
udp.bind(a.port, a.host);
Bun.serve({
  hostname: a.host,
  port: a["status-port"],
  fetch: () => Response.json({ name: a.name, answer: answerOf(a.lb, health), health, changes }),
});
console.log(
  `${stamp()} dns: ${a.name} on ${a.host}:${a.port} (udp), ttl ${a.ttl} s; checking ${a.lb.map((t) => `${t.region}=${t.address}`).join(", ")}`,
);
void checkLoop();
