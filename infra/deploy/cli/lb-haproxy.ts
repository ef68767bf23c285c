// HAProxy's runtime API (the rehearsal's load balancer, infra/rehearsal/haproxy.cfg.tftpl): one
// command per TCP connection to its admin stats socket on the LB's private address. Out of
// rotation: `set server <backend>/<server> state drain` (no new requests), `show stat` until the
// server's scur (current sessions) is 0 or the bound passes, then `state maint`. Back: `state
// ready`, then `show stat` until its status is UP (its health checks passed `rise` times).
import { connect } from "node:net";
import type { Host } from "./inventory.ts";
import type { HaproxyLbConfig, LbDeps, Rotation } from "./lb.ts";
import { poll } from "./lb-poll.ts";

/** One runtime API command; its answer (HAProxy closes the connection after it). */
export function runtimeCommand(admin: string, command: string, timeoutMs = 5000): Promise<string> {
  const i = admin.lastIndexOf(":");
  return new Promise((resolve, reject) => {
    let out = "";
    const s = connect({ host: admin.slice(0, i), port: Number(admin.slice(i + 1)) });
    s.setTimeout(timeoutMs, () => s.destroy(new Error(`HAProxy runtime API ${admin}: no answer to ${command}`)));
    s.on("connect", () => s.end(`${command}\n`));
    s.on("data", (d) => {
      out += d.toString();
    });
    s.on("error", (e) => reject(new Error(`HAProxy runtime API ${admin}: ${e.message}`)));
    s.on("close", () => resolve(out));
  });
}

export interface ServerStat {
  scur: number;
  status: string;
}

/** `show stat`'s CSV: the row of `backend`/`server`, undefined when it has none. */
export function serverStat(csv: string, backend: string, server: string): ServerStat | undefined {
  const lines = csv.split("\n").filter((l) => l.trim());
  const header = lines[0]?.replace(/^#\s*/, "").split(",") ?? [];
  const col = (name: string) => header.indexOf(name);
  for (const line of lines.slice(1)) {
    const f = line.split(",");
    if (f[col("pxname")] === backend && f[col("svname")] === server)
      return { scur: Number(f[col("scur")]), status: f[col("status")] ?? "" };
  }
  return undefined;
}

export function haproxyLb(c: HaproxyLbConfig, deps: LbDeps = {}): Rotation {
  const sleep = deps.sleep ?? ((ms: number) => Bun.sleep(ms));
  const name = (h: Host) => `${c.backend}/${c.servers[h.name] ?? h.name}`;
  const command = async (cmd: string) => {
    const out = (await runtimeCommand(c.admin, cmd)).trim();
    if (out) throw new Error(`HAProxy ${c.admin}: ${cmd}: ${out.split("\n")[0]}`);
  };
  const stat = async (h: Host) => {
    const s = serverStat(await runtimeCommand(c.admin, "show stat"), c.backend, c.servers[h.name] ?? h.name);
    if (!s) throw new Error(`HAProxy ${c.admin}: no server ${name(h)} in show stat`);
    return s;
  };
  return {
    async out(h) {
      const t0 = Date.now();
      await command(`set server ${name(h)} state drain`);
      const idle = await poll(
        async () => ((await stat(h)).scur === 0 ? true : undefined),
        c.drainTimeoutMs,
        200,
        sleep,
      );
      const left = idle ? 0 : (await stat(h)).scur;
      await command(`set server ${name(h)} state maint`);
      const s = ((Date.now() - t0) / 1000).toFixed(1);
      return idle
        ? `${name(h)} drained (no request in flight after ${s} s), now in maintenance`
        : `${name(h)} still had ${left} request(s) in flight after ${s} s (the bound): in maintenance anyway`;
    },
    async in(h) {
      const t0 = Date.now();
      await command(`set server ${name(h)} state ready`);
      const up = await poll(
        async () => ((await stat(h)).status === "UP" ? true : undefined),
        c.upTimeoutMs,
        250,
        sleep,
      );
      if (!up)
        throw new Error(
          `HAProxy ${c.admin}: ${name(h)} not UP ${c.upTimeoutMs} ms after state ready (${(await stat(h)).status})`,
        );
      return `${name(h)} back in rotation: UP after ${((Date.now() - t0) / 1000).toFixed(1)} s`;
    },
  };
}
