// The operator's login on a rehearsal host: `ops` over SSH with our key, the host keys pinned in a
// known_hosts file of the rehearsal's own (StrictHostKeyChecking=yes), root through sudo: what
// docs/deploy.md asks of an operator (`ssh ops@<host> sudo ...`).
import { appendFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DATA, type HostSpec } from "./config.ts";
import { type RunResult, run } from "./exec.ts";

export const KNOWN_HOSTS = join(DATA, "known_hosts");

export function resetKnownHosts(): void {
  writeFileSync(KNOWN_HOSTS, "", { mode: 0o600 });
}

export function pinHostKey(h: HostSpec, publicKey: string): void {
  appendFileSync(KNOWN_HOSTS, `${h.ip} ${publicKey.trim().split(/\s+/).slice(0, 2).join(" ")}\n`);
}

export function sshArgs(key: string): string[] {
  return [
    "-F",
    "none",
    "-i",
    key,
    "-o",
    "IdentitiesOnly=yes",
    "-o",
    "BatchMode=yes",
    "-o",
    "StrictHostKeyChecking=yes",
    "-o",
    `UserKnownHostsFile=${KNOWN_HOSTS}`,
    "-o",
    "GlobalKnownHostsFile=/dev/null",
    "-o",
    "ConnectTimeout=5",
    "-o",
    "LogLevel=ERROR",
  ];
}

/** `script` as root on `h`: ssh ops@<ip> sudo -n /bin/sh -euc <script>. */
export function asOps(
  h: HostSpec,
  key: string,
  script: string,
  o: { input?: string; timeoutMs?: number; user?: string } = {},
): RunResult {
  const quoted = `'${script.replace(/'/g, `'\\''`)}'`;
  return run(["ssh", ...sshArgs(key), `${o.user ?? "ops"}@${h.ip}`, `sudo -n /bin/sh -euc ${quoted}`], {
    input: o.input,
    timeoutMs: o.timeoutMs ?? 120_000,
  });
}

export function asOpsChecked(
  h: HostSpec,
  key: string,
  step: string,
  script: string,
  o: { input?: string; timeoutMs?: number } = {},
): string {
  const r = asOps(h, key, script, o);
  if (r.code !== 0)
    throw new Error(
      `${h.name}: ${step} failed (exit ${r.code}): ${`${r.stderr}\n${r.stdout}`.trim().split("\n").slice(-10).join("\n")}`,
    );
  return r.stdout;
}

/** A shell line writing `content` to `path` with install(1)'s mode and owner (content as base64: no quoting). */
export function putFile(path: string, content: string, mode: string, owner = "root", group = "root"): string {
  return `echo ${Buffer.from(content).toString("base64")} | base64 -d | install -m ${mode} -o ${owner} -g ${group} /dev/stdin ${path}`;
}
