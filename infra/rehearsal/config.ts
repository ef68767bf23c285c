// The rehearsal's fixed choices: where its files live, its network, its fleet: one region (fsn1)
// by default, two with the witness (`--regions fsn1,hel1`); every address is in 10.77.0.0/16 and every host-side name starts with `rh-`.
import { join, resolve } from "node:path";

export const REPO = resolve(import.meta.dir, "..", "..");
/** The clone's own files of the rehearsal: state, keys, machine layers, logs. */
export const DATA = join(REPO, ".data", "rehearsal");
/** The deploy inventory without its `lb`: a gateway deploy restarts in place (the old way). */
export const NO_LB_INVENTORY = join(DATA, "inventory-no-lb.json");
/** The image cache shared by every clone on this machine (CI's fresh clones reuse it). */
export const CACHE = process.env.REHEARSAL_CACHE || "/var/cache/captcha-pipeline-rehearsal";

export const SUITE = "bookworm";
export const BRIDGE = "rh-br0";
export const SUBNET = "10.77.0.0/16";
export const BRIDGE_IP = "10.77.0.1";
export const PREFIX = 16;
export const EMULATOR_PORT = 18080;
export const ARTIFACT_PORT = 18081;
/** HAProxy's runtime API on the LB's private address (`stats socket ... level admin`): the deploy drains through it. */
export const LB_ADMIN_PORT = 9999;
/** The alert receiver (infra/monitoring/alert-receiver.ts) the fleet's Alertmanager posts to. */
export const ALERT_PORT = 18082;
/**
 * The failover name server (dns-server.ts) on the bridge: authoritative for SHARED_ZONE, it answers
 * SHARED_NAME with the regions' LBs in rotation. Its status (JSON) on DNS_STATUS_PORT.
 */
export const DNS_PORT = 53;
export const DNS_STATUS_PORT = 18083;
export const SHARED_ZONE = "rehearsal.test";
export const SHARED_NAME = `api.${SHARED_ZONE}`;

export type Role = "app" | "nats" | "postgres" | "lb" | "monitoring" | "witness";

export interface HostSpec {
  /** The host's name (its hostname, the inventory's name); the container is `rh-<name>`. */
  name: string;
  region: string;
  role: Role;
  ip: string;
}

/** One region's fleet; region k = 1 is 10.77.1.x (the production layout's 10.0.k.x). */
export function fleet(region = "fsn1", k = 1): HostSpec[] {
  return [
    { name: `${region}-lb-1`, region, role: "lb", ip: `10.77.${k}.5` },
    // Two app hosts behind the LB: a gateway deploy takes one out of rotation while the other serves.
    ...[1, 2].map((i): HostSpec => ({ name: `${region}-app-${i}`, region, role: "app", ip: `10.77.${k}.${9 + i}` })),
    // Three, as in production: a JetStream cluster does not start with a single server.
    ...[1, 2, 3].map(
      (i): HostSpec => ({ name: `${region}-nats-${i}`, region, role: "nats", ip: `10.77.${k}.${19 + i}` }),
    ),
    { name: `${region}-pg-1`, region, role: "postgres", ip: `10.77.${k}.30` },
    // Prometheus and Alertmanager (monitoring.yaml), at Terraform's .40 of the first region.
    { name: `${region}-mon-1`, region, role: "monitoring", ip: `10.77.${k}.40` },
  ];
}

/** Where the witness node stands: a third location (Terraform's witness_location), 10.77.100.10 (10.0.100.x). */
export const WITNESS_LOCATION = "nbg1";

/**
 * The fleet of `regions`: the first region's is fleet()'s (with the monitoring host); each other
 * region k has its LB, one app host, 3 NATS and Postgres at 10.77.k.x; with two regions or more,
 * the witness node (a single one: Terraform's witness_in_regions = false).
 */
export function fleetOf(regions: string[]): HostSpec[] {
  if (!regions.length) throw new Error("no region");
  const [first, ...others] = regions;
  const rest = others.flatMap((r, i) =>
    fleet(r, i + 2).filter((h) => h.role !== "monitoring" && h.name !== `${r}-app-2`),
  );
  const witness: HostSpec[] = others.length
    ? [{ name: `${WITNESS_LOCATION}-witness-1`, region: WITNESS_LOCATION, role: "witness", ip: "10.77.100.10" }]
    : [];
  return [...fleet(first, 1), ...rest, ...witness];
}

/** `--regions fsn1,hel1` (default: fsn1 alone), each a lowercase region name, no repeats. */
export function parseRegions(arg: string | undefined): string[] {
  const regions = (arg ?? "fsn1").split(",").map((r) => r.trim());
  for (const r of regions)
    if (!/^[a-z][a-z0-9]*$/.test(r)) throw new Error(`--regions: "${r}" is not a region name (fsn1,hel1)`);
  if (new Set(regions).size !== regions.length) throw new Error(`--regions: a region named twice (${arg})`);
  if (regions.length > 2) throw new Error("--regions: at most two regions fit this machine (fsn1,hel1)");
  return regions;
}

export const machineName = (h: { name: string }) => `rh-${h.name}`;
