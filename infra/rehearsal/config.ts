// The rehearsal's fixed choices: where its files live, its network, its fleet. One region (fsn1)
// for now; every address is in 10.77.0.0/16 and every host-side name starts with `rh-`.
import { join, resolve } from "node:path";

export const REPO = resolve(import.meta.dir, "..", "..");
/** The clone's own files of the rehearsal: state, keys, machine layers, logs. */
export const DATA = join(REPO, ".data", "rehearsal");
/** The image cache shared by every clone on this machine (CI's fresh clones reuse it). */
export const CACHE = process.env.REHEARSAL_CACHE || "/var/cache/captcha-pipeline-rehearsal";

export const SUITE = "bookworm";
export const BRIDGE = "rh-br0";
export const SUBNET = "10.77.0.0/16";
export const BRIDGE_IP = "10.77.0.1";
export const PREFIX = 16;
export const EMULATOR_PORT = 18080;
export const ARTIFACT_PORT = 18081;
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
    { name: `${region}-app-1`, region, role: "app", ip: `10.77.${k}.10` },
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
