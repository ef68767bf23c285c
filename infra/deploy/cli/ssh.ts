// Commands on a host over OpenSSH's own client (`ssh`, non-interactive). Uploads go through the
// same channel (`cat > file` fed from a local file), so hosts need no sftp or scp.
import { type Collected, spawnCollect } from "../../spawn.ts";
import type { Host } from "./inventory.ts";

export type SshResult = Collected;

export interface Ssh {
  /**
   * Runs `script` with the host's /bin/sh; `input` is a local file fed to its stdin, `stdin` a text
   * (credentials: stdin is how a secret reaches a host, never the script, which is a command line).
   */
  run(host: Host, script: string, o?: RunOptions): Promise<SshResult>;
  /** Like run, but throws (with the host, the step and stderr) unless it exits 0; returns stdout. */
  check(host: Host, step: string, script: string, o?: RunOptions): Promise<string>;
}

export interface RunOptions {
  input?: string;
  stdin?: string;
  timeoutMs?: number;
}

export interface SshOptions {
  /** A private key (`-i`); default: the agent's and ssh's defaults. */
  key?: string;
  /**
   * The only known_hosts file ssh reads (the system's and the user's are not): a host whose key is
   * not in it is refused (StrictHostKeyChecking=yes), never added. The deploy writes it from the
   * inventory's hostKeys (host-keys.ts).
   */
  knownHosts: string;
  connectTimeoutS?: number;
}

/** What ssh prints when StrictHostKeyChecking refuses a host's key. */
const HOST_KEY_REFUSED = /Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED|No \S+ host key is known/;

/** A single-quoted shell word. */
export const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/** OpenSSH's client with host keys checked strictly against `o.knownHosts` alone. */
export function createSsh(o: SshOptions): Ssh {
  const base = [
    "-F",
    "none",
    "-o",
    "BatchMode=yes",
    "-o",
    "StrictHostKeyChecking=yes",
    "-o",
    `UserKnownHostsFile=${o.knownHosts}`,
    "-o",
    "GlobalKnownHostsFile=/dev/null",
    "-o",
    "UpdateHostKeys=no",
    "-o",
    `ConnectTimeout=${o.connectTimeoutS ?? 10}`,
    "-o",
    "LogLevel=ERROR",
    ...(o.key ? ["-i", o.key, "-o", "IdentitiesOnly=yes"] : []),
  ];
  const run: Ssh["run"] = (host, script, opts = {}) =>
    spawnCollect(
      ["ssh", ...base, "-p", String(host.ssh.port), `${host.ssh.user}@${host.ssh.host}`, `set -eu\n${script}`],
      {
        stdin: opts.stdin !== undefined ? Buffer.from(opts.stdin) : opts.input ? Bun.file(opts.input) : "ignore",
        timeoutMs: opts.timeoutMs ?? 120_000,
      },
    );
  return {
    run,
    async check(host, step, script, opts) {
      const r = await run(host, script, opts);
      if (r.code === 255 && HOST_KEY_REFUSED.test(r.stderr))
        throw new Error(
          `${host.name}: its host key is not the one pinned in the inventory's hostKeys: refused by ssh before ${step}, nothing was run on it`,
        );
      if (r.code !== 0)
        throw new Error(
          `${host.name}: ${step} failed (exit ${r.code})${r.stderr.trim() ? `: ${r.stderr.trim().split("\n").slice(-3).join(" | ")}` : ""}`,
        );
      return r.stdout;
    },
  };
}
