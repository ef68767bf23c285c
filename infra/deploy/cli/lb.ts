// Taking a gateway out of its load balancer around its restart, so that a deploy refuses no client:
// the inventory's `lb` says which load balancer fronts the app hosts' gateways (docs/deploy.md,
// "Gapless gateway deploys"). Per host: out of rotation (no new requests) -> its in-flight requests
// finish (or a bound passes) -> [the deploy restarts it, /readyz answers] -> back in rotation ->
// the load balancer sees it healthy -> the next host. Without `lb` the deploy restarts in place.
// Two kinds: HAProxy's runtime API (lb-haproxy.ts, the rehearsal's LB) and Hetzner's Load Balancer
// API (lb-hetzner.ts, production's).
import { readFileSync } from "node:fs";
import { z } from "zod";
import type { Host } from "./inventory.ts";
import { haproxyLb } from "./lb-haproxy.ts";
import { hetznerLb } from "./lb-hetzner.ts";

const Ms = z.number().int().min(0).max(600_000);

export const HaproxyLbConfig = z
  .object({
    kind: z.literal("haproxy"),
    /** The runtime API's address, `host:port`: HAProxy's `stats socket ipv4@<private ip>:<port> level admin`. */
    admin: z.string().regex(/^[^\s:]+:\d{1,5}$/, "host:port of HAProxy's admin stats socket"),
    /** The backend holding the gateways (haproxy.cfg's `backend`). */
    backend: z.string().min(1).default("gateways"),
    /** An app host's server name in that backend, when it is not the host's name. */
    servers: z.record(z.string(), z.string().min(1)).default({}),
    /** How long a drained server's in-flight requests may take (longest long-poll and then some). */
    drainTimeoutMs: Ms.default(30_000),
    /** How long the load balancer may take to see a host back UP (its health checks' rise). */
    upTimeoutMs: Ms.default(60_000),
  })
  .strict();

export const HetznerLbConfig = z
  .object({
    kind: z.literal("hetzner"),
    /** The load balancer's id (Terraform's hcloud_load_balancer.id). */
    loadBalancer: z.number().int().positive(),
    /** Each app host's Hetzner server id, by the inventory's host name. */
    servers: z.record(z.string(), z.number().int().positive()),
    /** The API token's environment variable (a read-write token of the project). */
    tokenEnv: z
      .string()
      .regex(/^[A-Z_][A-Z0-9_]*$/)
      .default("HCLOUD_TOKEN"),
    api: z.url().default("https://api.hetzner.cloud/v1"),
    /** Targets over the private network, as lb.tf adds them. */
    usePrivateIp: z.boolean().default(true),
    /** Hetzner shows no in-flight count: how long a removed target keeps serving what it has. */
    drainMs: Ms.default(15_000),
    upTimeoutMs: Ms.default(120_000),
  })
  .strict();

export const LbConfig = z.discriminatedUnion("kind", [HaproxyLbConfig, HetznerLbConfig]);
export type LbConfig = z.infer<typeof LbConfig>;
/**
 * The inventory's `lb`: one load balancer in front of every app host, or one per region, by region
 * name (production: each region's own Hetzner LB; a deploy drains a host through its region's).
 */
export const LbByRegion = z
  .record(z.string().regex(/^[a-z][a-z0-9]*$/, "a region name (fsn1)"), LbConfig)
  .refine((r) => Object.keys(r).length > 0, "no region");
export const LbField = z.union([LbConfig, LbByRegion]);
export type LbField = z.infer<typeof LbField>;
export type HaproxyLbConfig = z.infer<typeof HaproxyLbConfig>;
export type HetznerLbConfig = z.infer<typeof HetznerLbConfig>;

/** A load balancer the deploy takes a host out of and puts back; each step returns a line to log. */
export interface Rotation {
  /** No new requests to `host`; resolves when its in-flight requests are done (or the bound passed). */
  out(host: Host): Promise<string>;
  /** `host` back in rotation; resolves when the load balancer sees it healthy. */
  in(host: Host): Promise<string>;
}

export interface LbDeps {
  env?: Record<string, string | undefined>;
  sleep?: (ms: number) => Promise<void>;
  fetch?: typeof fetch;
}

/** The rotation of one load balancer (undefined: none, the deploy restarts in place). */
export function createRotation(lb: LbConfig | undefined, deps: LbDeps = {}): Rotation | undefined {
  if (!lb) return undefined;
  return lb.kind === "haproxy" ? haproxyLb(lb, deps) : hetznerLb(lb, deps);
}

const isOne = (lb: LbField): lb is LbConfig => "kind" in lb && typeof lb.kind === "string";

/**
 * Each host's rotation from the inventory's `lb`: the one LB for every host, or its region's.
 * Checked for every host before any is touched: a host whose region has no LB in a per-region
 * `lb` is an error (a gateway restarted in place behind a load balancer would refuse clients).
 */
export function rotationsFor(
  lb: LbField | undefined,
  hosts: Array<Pick<Host, "name" | "region">>,
  deps: LbDeps = {},
): (host: Pick<Host, "name" | "region">) => Rotation | undefined {
  if (!lb) return () => undefined;
  if (isOne(lb)) {
    const one = createRotation(lb, deps);
    return () => one;
  }
  const missing = hosts.filter((h) => !lb[h.region]).map((h) => `${h.name} (${h.region})`);
  if (missing.length)
    throw new Error(`the inventory's lb has no load balancer for the region of ${missing.join(", ")}`);
  const byRegion = new Map(Object.entries(lb).map(([r, c]) => [r, createRotation(c, deps)]));
  return (h) => byRegion.get(h.region);
}

/** The `lb` of an inventory file's JSON (Terraform's output wrapper unwrapped), checked; undefined when absent. */
export function lbOfInventory(raw: unknown, file: string): LbField | undefined {
  let v = raw;
  if (v && typeof v === "object" && "value" in v && "type" in v) v = (v as { value: unknown }).value;
  const lb = v && typeof v === "object" ? (v as { lb?: unknown }).lb : undefined;
  if (lb === undefined) return undefined;
  // One LB (it has a kind) or one per region: parsed as what it claims to be, so errors name its fields.
  const one = typeof lb === "object" && lb !== null && "kind" in lb;
  const r = one ? LbConfig.safeParse(lb) : LbByRegion.safeParse(lb);
  if (!r.success)
    throw new Error(
      `inventory ${file}:\n${r.error.issues.map((i) => `  lb.${i.path.join(".")}: ${i.message}`).join("\n")}`,
    );
  return r.data;
}

/** The `lb` of the inventory file at `path` (readInventory has read and checked the file first). */
export function readLbConfig(path: string): LbField | undefined {
  return lbOfInventory(JSON.parse(readFileSync(path, "utf8")), path);
}
