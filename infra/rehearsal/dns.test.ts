// The failover name server of the rehearsal: its messages and rules (pure), then the server itself
// (dns-server.ts, a real UDP server in its own process) asked by a real DNS client (node:dns's
// Resolver) while the HTTPS health checks of two stand-in load balancers pass and fail.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { createSocket } from "node:dgram";
import { Resolver } from "node:dns/promises";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "@pipeline/devstack";
import { eventually } from "@pipeline/devstack/testing";
import { answerOf, initialHealth, nextHealth, type Target } from "./dns-failover.ts";
import { encodeAnswer, parseQuestion, RCODE, respond } from "./dns-wire.ts";
import { check } from "./exec.ts";

/** A query for `name` (type A unless told), as a resolver sends it (RD set). */
function query(name: string, type = 1, id = 0x1234): Uint8Array {
  const labels = name.split(".").flatMap((l) => [l.length, ...new TextEncoder().encode(l)]);
  return new Uint8Array([id >> 8, id & 0xff, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, ...labels, 0, 0, type, 0, 1]);
}

test("a query's question is read; the answer echoes it with A records, authoritative, RD copied", () => {
  const q = parseQuestion(query("API.Rehearsal.Test"))!;
  expect(q).toMatchObject({ id: 0x1234, name: "api.rehearsal.test", type: 1, class: 1 });
  const out = encodeAnswer(q, RCODE.noError, ["10.77.1.5", "10.77.2.5"], 5);
  const v = new DataView(out.buffer);
  expect(v.getUint16(0)).toBe(0x1234);
  expect(v.getUint16(2)).toBe(0x8000 | 0x0400 | 0x0100);
  expect(v.getUint16(6)).toBe(2);
  expect([...out.subarray(out.length - 4)]).toEqual([10, 77, 2, 5]);
  expect(v.getUint32(out.length - 10)).toBe(5);
});

test("not a query (too short, a response, a label running past the end): no answer", () => {
  expect(parseQuestion(new Uint8Array(5))).toBeUndefined();
  const response = query("a.test");
  response[2] = 0x81;
  expect(parseQuestion(response)).toBeUndefined();
  expect(parseQuestion(query("a.test").subarray(0, 16))).toBeUndefined();
});

test("names: the shared one answered, other names of the zone NXDOMAIN, other zones REFUSED, other types empty", () => {
  const rcode = (name: string, type = 1) =>
    respond(parseQuestion(query(name, type))!, "rehearsal.test", "api.rehearsal.test", ["10.0.0.1"], 5)[3]! & 0xf;
  const count = (name: string, type = 1) =>
    new DataView(
      respond(parseQuestion(query(name, type))!, "rehearsal.test", "api.rehearsal.test", ["10.0.0.1"], 5).buffer,
    ).getUint16(6);
  expect([rcode("api.rehearsal.test"), count("api.rehearsal.test")]).toEqual([RCODE.noError, 1]);
  expect([rcode("api.rehearsal.test", 28), count("api.rehearsal.test", 28)]).toEqual([RCODE.noError, 0]);
  expect(rcode("www.rehearsal.test")).toBe(RCODE.nxDomain);
  expect(rcode("example.com")).toBe(RCODE.refused);
});

test("a load balancer leaves the answer after 2 failed checks and comes back after 2 good ones; none up: all", () => {
  const targets: Target[] = [
    { region: "fsn1", address: "10.77.1.5" },
    { region: "hel1", address: "10.77.2.5" },
  ];
  let h = initialHealth(targets);
  expect(answerOf(targets, h)).toEqual(["10.77.1.5", "10.77.2.5"]);
  h = nextHealth(h, { fsn1: false, hel1: true }, 1);
  expect(answerOf(targets, h)).toEqual(["10.77.1.5", "10.77.2.5"]);
  h = nextHealth(h, { fsn1: false, hel1: true }, 2);
  expect(answerOf(targets, h)).toEqual(["10.77.2.5"]);
  expect(h.fsn1).toEqual({ inRotation: false, streak: 0, changedAt: 2 });
  // One good check is not enough; a bad one in between starts the count again.
  h = nextHealth(h, { fsn1: true, hel1: true }, 3);
  h = nextHealth(h, { fsn1: false, hel1: true }, 4);
  h = nextHealth(h, { fsn1: true, hel1: true }, 5);
  expect(answerOf(targets, h)).toEqual(["10.77.2.5"]);
  h = nextHealth(h, { fsn1: true, hel1: true }, 6);
  expect(answerOf(targets, h)).toEqual(["10.77.1.5", "10.77.2.5"]);
  h = nextHealth(nextHealth(h, { fsn1: false, hel1: false }, 7), { fsn1: false, hel1: false }, 8);
  expect(answerOf(targets, h)).toEqual(["10.77.1.5", "10.77.2.5"]);
});

let dir: string;
const healthy = { fsn1: true, hel1: true };
let lbs: ReturnType<typeof Bun.serve>[] = [];
let server: ReturnType<typeof spawn> | undefined;
let dnsPort = 0;
let statusPort = 0;
const freeUdpPort = () =>
  new Promise<number>((resolve) => {
    const s = createSocket("udp4");
    s.bind(0, "127.0.0.1", () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "rh-dns-"));
  check([
    "openssl",
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-subj",
    "/CN=api.rehearsal.test",
    "-addext",
    "subjectAltName=DNS:api.rehearsal.test",
    "-days",
    "2",
    "-keyout",
    join(dir, "key.pem"),
    "-out",
    join(dir, "cert.pem"),
  ]);
  const tls = { cert: readFileSync(join(dir, "cert.pem"), "utf8"), key: readFileSync(join(dir, "key.pem"), "utf8") };
  lbs = (["fsn1", "hel1"] as const).map((region) =>
    Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      tls,
      fetch: (req) =>
        new URL(req.url).pathname === "/readyz/accepting" && healthy[region]
          ? new Response("ok")
          : new Response("fenced", { status: 503 }),
    }),
  );
  dnsPort = await freeUdpPort();
  statusPort = await freePort();
  server = spawn(
    process.execPath,
    [
      join(import.meta.dir, "dns-server.ts"),
      ...["--host", "127.0.0.1", "--port", String(dnsPort), "--status-port", String(statusPort)],
      ...["--zone", "rehearsal.test", "--name", "api.rehearsal.test", "--ttl", "1", "--interval-ms", "200"],
      ...[
        "--ca",
        join(dir, "cert.pem"),
        "--lb",
        `fsn1=127.0.0.1:${lbs[0]!.port}`,
        "--lb",
        `hel1=127.0.0.1:${lbs[1]!.port}`,
      ],
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
}, 30_000);

afterAll(() => {
  server?.kill();
  for (const l of lbs) l.stop(true);
  rmSync(dir, { recursive: true, force: true });
});

test("the server answers a real resolver with the load balancers that pass their check, and follows their health", async () => {
  const resolver = new Resolver({ timeout: 500, tries: 1 });
  resolver.setServers([`127.0.0.1:${dnsPort}`]);
  // Both stand-ins listen on 127.0.0.1: the answer names the address once per region in rotation.
  const answer = () => resolver.resolve4("api.rehearsal.test").catch(() => [] as string[]);
  await eventually(async () => ((await answer()).length === 2 ? true : undefined), 10_000, 100);
  const status = async () =>
    (await (await fetch(`http://127.0.0.1:${statusPort}/status`)).json()) as {
      health: Record<string, { inRotation: boolean }>;
      changes: Array<{ region: string; inRotation: boolean }>;
    };
  healthy.fsn1 = false;
  await eventually(async () => ((await answer()).length === 1 ? true : undefined), 5_000, 100);
  expect((await status()).health.fsn1!.inRotation).toBe(false);
  healthy.fsn1 = true;
  await eventually(async () => ((await answer()).length === 2 ? true : undefined), 5_000, 100);
  expect((await status()).changes.map((c) => `${c.region} ${c.inRotation}`)).toEqual(["fsn1 false", "fsn1 true"]);
  await expect(resolver.resolve4("example.com")).rejects.toMatchObject({ code: "EREFUSED" });
}, 30_000);

test("a bad flag is refused by name, and the server does not start", () => {
  const r = Bun.spawnSync([
    process.execPath,
    join(import.meta.dir, "dns-server.ts"),
    "--host",
    "127.0.0.1",
    "--port",
    "53x",
  ]);
  expect(r.exitCode).toBe(2);
  expect(r.stderr.toString()).toContain("--port");
});
