// Hetzner Cloud's Load Balancer API (production's load balancer, infra/deploy/terraform/lb.tf),
// https://docs.hetzner.cloud/reference/cloud#load-balancer-actions. Out of rotation:
// `POST /load_balancers/{id}/actions/remove_target` ({type: server, server: {id}}), the action
// polled at `GET /actions/{id}` to `success`, then `drainMs` for what the host still serves (the API
// shows no in-flight count). Back: `add_target` (use_private_ip, as lb.tf adds it), its action,
// then `GET /load_balancers/{id}` until the target's every health_status is `healthy`.
// Tested against a stand-in server that checks the requests (lb.test.ts), not against Hetzner.
import type { Host } from "./inventory.ts";
import type { HetznerLbConfig, LbDeps, Rotation } from "./lb.ts";
import { poll } from "./lb-poll.ts";

interface Action {
  id: number;
  status: "running" | "success" | "error";
  error?: { code: string; message: string } | null;
}

interface Target {
  type: string;
  server?: { id: number };
  health_status?: Array<{ listen_port: number; status: "healthy" | "unhealthy" | "unknown" }>;
}

export function hetznerLb(c: HetznerLbConfig, deps: LbDeps = {}): Rotation {
  const token = (deps.env ?? process.env)[c.tokenEnv];
  if (!token) throw new Error(`the Hetzner load balancer needs an API token in ${c.tokenEnv} (lb.tokenEnv)`);
  const sleep = deps.sleep ?? ((ms: number) => Bun.sleep(ms));
  const doFetch = deps.fetch ?? fetch;
  const base = c.api.replace(/\/+$/, "");
  const lbPath = `/load_balancers/${c.loadBalancer}`;

  const call = async <T>(method: "GET" | "POST", path: string, body?: unknown): Promise<T> => {
    for (let attempt = 1; ; attempt++) {
      const res = await doFetch(`${base}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
        ...(body ? { body: JSON.stringify(body) } : {}),
        signal: AbortSignal.timeout(30_000),
      });
      const json = (await res.json().catch(() => ({}))) as T & { error?: { code: string; message: string } };
      if (res.ok) return json;
      // `locked`: another action runs on the load balancer; it is retried a few times.
      if (json.error?.code === "locked" && attempt < 10) {
        await sleep(1000);
        continue;
      }
      throw new Error(
        `Hetzner API ${method} ${path}: ${res.status}${json.error ? ` ${json.error.code}: ${json.error.message}` : ""}`,
      );
    }
  };
  const serverId = (h: Host) => {
    const id = c.servers[h.name];
    if (!id) throw new Error(`lb.servers has no Hetzner server id for ${h.name}`);
    return id;
  };
  const act = async (what: string, body: unknown) => {
    const { action } = await call<{ action: Action }>("POST", `${lbPath}/actions/${what}`, body);
    const done = await poll(
      async () => {
        const a = (await call<{ action: Action }>("GET", `/actions/${action.id}`)).action;
        if (a.status === "error") throw new Error(`Hetzner ${what} failed: ${a.error?.code}: ${a.error?.message}`);
        return a.status === "success" ? a : undefined;
      },
      60_000,
      500,
      sleep,
    );
    if (!done) throw new Error(`Hetzner ${what}: action ${action.id} still running after 60 s`);
  };
  const health = async (id: number) => {
    const { load_balancer } = await call<{ load_balancer: { targets: Target[] } }>("GET", lbPath);
    const t = load_balancer.targets.find((x) => x.type === "server" && x.server?.id === id);
    const statuses = (t?.health_status ?? []).map((s) => s.status);
    return statuses.length && statuses.every((s) => s === "healthy") ? "healthy" : statuses.join(",") || "no status";
  };
  return {
    async out(h) {
      const id = serverId(h);
      await act("remove_target", { type: "server", server: { id } });
      await sleep(c.drainMs);
      return `server ${id} removed from load balancer ${c.loadBalancer}; waited ${c.drainMs} ms for its requests`;
    },
    async in(h) {
      const id = serverId(h);
      const t0 = Date.now();
      await act("add_target", { type: "server", server: { id }, use_private_ip: c.usePrivateIp });
      let last = "";
      const ok = await poll(
        async () => ((last = await health(id)) === "healthy" ? true : undefined),
        c.upTimeoutMs,
        1000,
        sleep,
      );
      if (!ok)
        throw new Error(
          `Hetzner load balancer ${c.loadBalancer}: server ${id} not healthy after ${c.upTimeoutMs} ms (${last})`,
        );
      return `server ${id} back in load balancer ${c.loadBalancer}: healthy after ${((Date.now() - t0) / 1000).toFixed(1)} s`;
    },
  };
}
