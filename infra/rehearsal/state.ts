// .data/rehearsal/state.json: what `up` started (machines, host processes, the network), so that
// `down` and `status` find it from another process.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DATA, type HostSpec } from "./config.ts";

export interface HostState extends HostSpec {
  machine: string;
  nspawnPid: number;
  leaderPid: number;
  hostKey: string;
  bootMs?: number;
}

export interface State {
  startedAt: string;
  phase: "starting" | "up" | "failed";
  /** The regions of the fleet (`--regions`; fsn1 alone by default). */
  regions?: string[];
  image?: { key: string; root: string };
  hosts: HostState[];
  services: {
    emulatorPid?: number;
    artifactsPid?: number;
    emulatorUrl?: string;
    /** The alert receiver the monitoring host's Alertmanager posts to, and its log. */
    alertsPid?: number;
    alertsUrl?: string;
    alertsLog?: string;
    /** The failover name server (dns-server.ts): its pid, address and status URL. */
    dnsPid?: number;
    dnsServer?: string;
    dnsStatusUrl?: string;
  };
  /** The first region's LB, and every region's. */
  lbUrl?: string;
  lbUrls?: Record<string, string>;
  /** The shared name's URL (`https://api.rehearsal.test`), resolved through `services.dnsServer`. */
  sharedUrl?: string;
  inventory?: string;
  apiKey?: string;
  /** Where the apps' secrets came from: the env files, or the deploy command's secrets store. */
  secrets?: "env" | "store";
  /** The secrets store the deploys were given (mode store). */
  secretsStore?: string;
  caFile?: string;
  timings: Record<string, number>;
}

export const STATE_FILE = join(DATA, "state.json");

export function readState(): State | undefined {
  if (!existsSync(STATE_FILE)) return undefined;
  return JSON.parse(readFileSync(STATE_FILE, "utf8")) as State;
}

export function writeState(s: State): void {
  mkdirSync(DATA, { recursive: true });
  writeFileSync(STATE_FILE, `${JSON.stringify(s, null, 2)}\n`, { mode: 0o600 });
}

export function clearState(): void {
  rmSync(STATE_FILE, { force: true });
}
