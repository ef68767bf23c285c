// The deploy's load balancers against stand-ins that check what they are sent: HAProxy's runtime
// API (a TCP server answering one command per connection, as `stats socket ... level admin` does)
// and Hetzner's Load Balancer API (an HTTP server checking method, path, token and body). Not run
// against Hetzner itself.
import { afterAll, describe, expect, test } from "bun:test";
import { createServer } from "node:net";
import type { Host } from "./inventory.ts";
import { createRotation, LbConfig, lbOfInventory, rotationsFor } from "./lb.ts";
import { serverStat } from "./lb-haproxy.ts";

const host = (name: string) => ({ name }) as Host;
const fast = { sleep: () => Bun.sleep(5) };

const HEADER = "# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status";
const row = (px: string, sv: string, scur: number, status: string) =>
  `${px},${sv},0,0,${scur},1,,9,0,0,,0,,0,0,0,0,${status}`;

describe("HAProxy runtime API", () => {
  const commands: string[] = [];
  let scur = 2;
  let status = "UP";
  let statsAfterReady = 0;
  const server = createServer((s) => {
    s.on("data", (d) => {
      const cmd = d.toString().trim();
      commands.push(cmd);
      if (cmd === "show stat") {
        if (status === "DRAIN" && scur > 0) scur--;
        if (status === "ready" && ++statsAfterReady >= 3) status = "UP";
        const shown = status === "ready" ? "DOWN 1/2" : status;
        s.end(
          `${HEADER}\n${row("gateways", "BACKEND", 0, "UP")}\n${row("gateways", "fsn1-app-1", scur, shown)}\n${row("gateways", "app2", 0, "UP")}\n\n`,
        );
      } else if (cmd === "set server gateways/fsn1-app-1 state drain") {
        status = "DRAIN";
        s.end("\n");
      } else if (cmd === "set server gateways/fsn1-app-1 state maint") {
        status = "MAINT";
        s.end("\n");
      } else if (cmd === "set server gateways/fsn1-app-1 state ready") {
        status = "ready";
        s.end("\n");
      } else s.end("No such server.\n\n");
    });
  });
  const listening = new Promise<number>((r) =>
    server.listen(0, "127.0.0.1", () => r((server.address() as { port: number }).port)),
  );
  afterAll(() => void server.close());

  test("show stat: a server's scur and status by backend and name", () => {
    const csv = `${HEADER}\n${row("gateways", "a", 3, "UP")}\n${row("other", "a", 0, "DOWN")}\n`;
    expect(serverStat(csv, "gateways", "a")).toEqual({ scur: 3, status: "UP" });
    expect(serverStat(csv, "other", "a")).toEqual({ scur: 0, status: "DOWN" });
    expect(serverStat(csv, "gateways", "b")).toBeUndefined();
  });

  test("out: drain, in-flight requests to 0, maintenance; in: ready, UP", async () => {
    const port = await listening;
    const lb = createRotation(
      LbConfig.parse({ kind: "haproxy", admin: `127.0.0.1:${port}`, drainTimeoutMs: 5000, upTimeoutMs: 5000 }),
      fast,
    )!;
    expect(await lb.out(host("fsn1-app-1"))).toMatch(/^gateways\/fsn1-app-1 drained \(no request in flight after/);
    expect(status).toBe("MAINT");
    expect(await lb.in(host("fsn1-app-1"))).toMatch(/^gateways\/fsn1-app-1 back in rotation: UP after/);
    expect(commands.filter((c) => c !== "show stat")).toEqual([
      "set server gateways/fsn1-app-1 state drain",
      "set server gateways/fsn1-app-1 state maint",
      "set server gateways/fsn1-app-1 state ready",
    ]);
    // Two polls saw sessions in flight before maintenance; three before UP.
    expect(commands.filter((c) => c === "show stat").length).toBeGreaterThanOrEqual(5);
  });

  test("an error of HAProxy's (an unknown server) stops the step, naming the command", async () => {
    const port = await listening;
    const lb = createRotation(LbConfig.parse({ kind: "haproxy", admin: `127.0.0.1:${port}` }), fast)!;
    await expect(lb.out(host("fsn1-app-9"))).rejects.toThrow(
      "set server gateways/fsn1-app-9 state drain: No such server.",
    );
  });
});

describe("Hetzner Load Balancer API (a stand-in, not Hetzner)", () => {
  const seen: string[] = [];
  const targets = new Map<number, number>(); // server id -> health polls since added
  let actionPolls = 0;
  const api = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      const body = req.method === "POST" ? await req.json() : undefined;
      seen.push(`${req.method} ${url.pathname}${body ? ` ${JSON.stringify(body)}` : ""}`);
      if (req.headers.get("authorization") !== "Bearer tok-123")
        return Response.json({ error: { code: "unauthorized", message: "unable to authenticate" } }, { status: 401 });
      if (req.method === "POST" && req.headers.get("content-type") !== "application/json")
        return Response.json({ error: { code: "invalid_input", message: "json" } }, { status: 400 });
      const b = body as { type: string; server: { id: number }; use_private_ip?: boolean } | undefined;
      if (url.pathname === "/v1/load_balancers/42/actions/remove_target" && b?.type === "server") {
        targets.delete(b.server.id);
        return Response.json({ action: { id: 7, command: "remove_target", status: "running" } }, { status: 201 });
      }
      if (url.pathname === "/v1/load_balancers/42/actions/add_target" && b?.type === "server") {
        if (b.use_private_ip !== true) return Response.json({ error: { code: "invalid_input" } }, { status: 422 });
        targets.set(b.server.id, 0);
        return Response.json({ action: { id: 8, command: "add_target", status: "running" } }, { status: 201 });
      }
      if (url.pathname === "/v1/actions/7" || url.pathname === "/v1/actions/8")
        return Response.json({
          action: { id: Number(url.pathname.split("/").pop()), status: ++actionPolls % 2 ? "running" : "success" },
        });
      if (url.pathname === "/v1/load_balancers/42" && req.method === "GET")
        return Response.json({
          load_balancer: {
            id: 42,
            targets: [...targets].map(([id, polls]) => {
              targets.set(id, polls + 1);
              const status = polls >= 2 ? "healthy" : "unknown";
              return { type: "server", server: { id }, health_status: [{ listen_port: 443, status }] };
            }),
          },
        });
      return Response.json({ error: { code: "not_found", message: url.pathname } }, { status: 404 });
    },
  });
  afterAll(() => void api.stop(true));
  const config = (over: object = {}) =>
    LbConfig.parse({
      kind: "hetzner",
      loadBalancer: 42,
      servers: { "fsn1-app-1": 1001 },
      api: `http://127.0.0.1:${api.port}/v1`,
      drainMs: 10,
      ...over,
    });

  test("out: remove_target and its action; in: add_target on the private network, then healthy", async () => {
    const lb = createRotation(config(), { ...fast, env: { HCLOUD_TOKEN: "tok-123" } })!;
    expect(await lb.out(host("fsn1-app-1"))).toBe(
      "server 1001 removed from load balancer 42; waited 10 ms for its requests",
    );
    expect(await lb.in(host("fsn1-app-1"))).toMatch(/^server 1001 back in load balancer 42: healthy after/);
    expect(seen.filter((s) => s.startsWith("POST"))).toEqual([
      'POST /v1/load_balancers/42/actions/remove_target {"type":"server","server":{"id":1001}}',
      'POST /v1/load_balancers/42/actions/add_target {"type":"server","server":{"id":1001},"use_private_ip":true}',
    ]);
    expect(seen).toContain("GET /v1/actions/7");
    expect(seen).toContain("GET /v1/actions/8");
    expect(seen.filter((s) => s === "GET /v1/load_balancers/42").length).toBe(3);
  });

  test("no token, a wrong token, a host without a server id: each refused with its reason", async () => {
    expect(() => createRotation(config({ tokenEnv: "MY_TOKEN" }), { env: {} })).toThrow(
      "the Hetzner load balancer needs an API token in MY_TOKEN",
    );
    const wrong = createRotation(config(), { ...fast, env: { HCLOUD_TOKEN: "nope" } })!;
    await expect(wrong.out(host("fsn1-app-1"))).rejects.toThrow(
      "Hetzner API POST /load_balancers/42/actions/remove_target: 401 unauthorized: unable to authenticate",
    );
    const lb = createRotation(config(), { ...fast, env: { HCLOUD_TOKEN: "tok-123" } })!;
    await expect(lb.out(host("fsn1-app-2"))).rejects.toThrow("lb.servers has no Hetzner server id for fsn1-app-2");
  });
});

describe("the inventory's lb", () => {
  test("absent: none; haproxy and hetzner parsed with defaults; a wrong one names the field", () => {
    expect(lbOfInventory({ hosts: [] }, "inv.json")).toBeUndefined();
    expect(
      lbOfInventory({ value: { hosts: [], lb: { kind: "haproxy", admin: "10.0.1.5:9999" } }, type: "x" }, "f"),
    ).toEqual({
      kind: "haproxy",
      admin: "10.0.1.5:9999",
      backend: "gateways",
      servers: {},
      drainTimeoutMs: 30_000,
      upTimeoutMs: 60_000,
    });
    expect(() => lbOfInventory({ lb: { kind: "hetzner", servers: {} } }, "inv.json")).toThrow(
      /inventory inv\.json:\n {2}lb\.loadBalancer: /,
    );
    expect(() => lbOfInventory({ lb: { kind: "f5" } }, "inv.json")).toThrow(/lb\.kind/);
  });
});

describe("one load balancer per region", () => {
  const haproxy = (admin: string) => ({ kind: "haproxy", admin });
  const hosts = [
    { name: "fsn1-app-1", region: "fsn1" },
    { name: "hel1-app-1", region: "hel1" },
  ];

  test("each host drains through its own region's LB; one LB serves every host", () => {
    const lb = lbOfInventory({ lb: { fsn1: haproxy("10.0.1.5:9999"), hel1: haproxy("10.0.2.5:9999") } }, "inv.json");
    expect(Object.keys(lb!).sort()).toEqual(["fsn1", "hel1"]);
    const of = rotationsFor(lb, hosts);
    expect(of(hosts[0]!)).toBeDefined();
    expect(of(hosts[1]!)).toBeDefined();
    expect(of(hosts[0]!)).not.toBe(of(hosts[1]!));
    const one = rotationsFor(lbOfInventory({ lb: haproxy("10.0.1.5:9999") }, "inv.json"), hosts);
    expect(one(hosts[0]!)).toBe(one(hosts[1]!));
    expect(rotationsFor(undefined, hosts)(hosts[0]!)).toBeUndefined();
  });

  test("a region without its LB, a wrong region name or a wrong LB of a region: refused, naming it", () => {
    const only = lbOfInventory({ lb: { fsn1: haproxy("10.0.1.5:9999") } }, "inv.json");
    expect(() => rotationsFor(only, hosts)).toThrow(
      "the inventory's lb has no load balancer for the region of hel1-app-1 (hel1)",
    );
    expect(() => lbOfInventory({ lb: { "Fsn-1": haproxy("10.0.1.5:9999") } }, "inv.json")).toThrow(
      /lb\.Fsn-1: Invalid key/,
    );
    expect(() => lbOfInventory({ lb: { fsn1: { kind: "haproxy", admin: "nope" } } }, "inv.json")).toThrow(
      /lb\.fsn1\.admin: host:port/,
    );
    expect(() => lbOfInventory({ lb: {} }, "inv.json")).toThrow(/no region/);
  });
});
