// The rehearsal's fixed choices: where its files live, its network, its fleet. One region (fsn1)
// for now; every address is in 10.77.0.0/16 and every host-side name starts with `rh-`.
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

export type Role = "app" | "nats" | "postgres" | "lb" | "monitoring";

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

export const machineName = (h: { name: string }) => `rh-${h.name}`;
