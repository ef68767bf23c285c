// Commands on a host over OpenSSH's own client (`ssh`, non-interactive). Uploads go through the
// same channel (`cat > file` fed from a local file), so hosts need no sftp or scp.
import type { Host } from "./inventory.ts";

export interface SshResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface Ssh {
  /** Runs `script` with the host's /bin/sh; `input` is a local file fed to its stdin. */
  run(host: Host, script: string, o?: { input?: string; timeoutMs?: number }): Promise<SshResult>;
  /** Like run, but throws (with the host, the step and stderr) unless it exits 0; returns stdout. */
  check(host: Host, step: string, script: string, o?: { input?: string; timeoutMs?: number }): Promise<string>;
}

export interface SshOptions {
  /** A private key (`-i`); default: the agent's and ssh's defaults. */
  key?: string;
  /** The known_hosts file; default ssh's own. New hosts are accepted once (accept-new), changed ones refused. */
  knownHosts?: string;
  connectTimeoutS?: number;
}

/** A single-quoted shell word. */
export const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

export function createSsh(o: SshOptions = {}): Ssh {
  const base = [
    "-F",
    "none",
    "-o",
    "BatchMode=yes",
    "-o",
    "StrictHostKeyChecking=accept-new",
    "-o",
    `ConnectTimeout=${o.connectTimeoutS ?? 10}`,
    "-o",
    "LogLevel=ERROR",
    ...(o.knownHosts ? ["-o", `UserKnownHostsFile=${o.knownHosts}`] : []),
    ...(o.key ? ["-i", o.key, "-o", "IdentitiesOnly=yes"] : []),
  ];
  const run: Ssh["run"] = async (host, script, opts = {}) => {
    const p = Bun.spawn(["ssh", ...base, "-p", String(host.ssh.port), `${host.ssh.user}@${host.ssh.host}`, `set -eu\n${script}`], {
      stdin: opts.input ? Bun.file(opts.input) : "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const timer = setTimeout(() => p.kill("SIGKILL"), opts.timeoutMs ?? 120_000);
    const [stdout, stderr, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    clearTimeout(timer);
    return { code, stdout, stderr };
  };
  return {
    run,
    async check(host, step, script, opts) {
      const r = await run(host, script, opts);
      if (r.code !== 0) throw new Error(`${host.name}: ${step} failed (exit ${r.code})${r.stderr.trim() ? `: ${r.stderr.trim().split("\n").slice(-3).join(" | ")}` : ""}`);
      return r.stdout;
    },
  };
}
