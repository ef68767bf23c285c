// The host keys a deploy trusts: only those pinned in the inventory (`hostKeys`), written into a
// known_hosts file of the deploy's own, which ssh checks strictly (StrictHostKeyChecking=yes: an
// unknown or different key ends the connection before any command runs). A pinned fingerprint
// becomes a key by asking the host (ssh-keyscan) and keeping only a key with that fingerprint.
import { createHash } from "node:crypto";
import { appendFileSync, writeFileSync } from "node:fs";
import type { Host } from "./inventory.ts";

/** The SHA256 fingerprint of a public key (`type base64`), as `ssh-keygen -l` prints it. */
export function fingerprintOf(key: string): string {
  const blob = key.trim().split(/\s+/)[1] ?? "";
  return `SHA256:${createHash("sha256").update(Buffer.from(blob, "base64")).digest("base64").replace(/=+$/, "")}`;
}

/** How known_hosts names a host: `host`, or `[host]:port` off port 22. */
export function knownHostsName(host: Host): string {
  return host.ssh.port === 22 ? host.ssh.host : `[${host.ssh.host}]:${host.ssh.port}`;
}

/**
 * The known_hosts lines for `host`: each pinned key, and each key of `scanned` (what the host
 * offered, `type base64`) whose fingerprint is pinned. Throws, naming the host and the
 * fingerprints offered, when that leaves no key: ssh would then refuse the host anyway.
 */
export function pinnedLines(host: Host, scanned: string[]): string[] {
  const keys = host.hostKeys.filter((k) => !k.startsWith("SHA256:"));
  const prints = new Set(host.hostKeys.filter((k) => k.startsWith("SHA256:")));
  const matched = prints.size ? scanned.filter((k) => prints.has(fingerprintOf(k))) : [];
  const lines = [...keys, ...matched].map((k) => `${knownHostsName(host)} ${k}`);
  if (!lines.length) {
    const offered = scanned.map(fingerprintOf).join(", ") || "no key";
    throw new Error(
      `${host.name}: its host key matches none of the inventory's hostKeys (pinned ${[...prints].join(", ")}; it offered ${offered}): refused, nothing was run on it`,
    );
  }
  return lines;
}

/** The public keys a host offers (`ssh-keyscan`), as `type base64`; untrusted until matched against a pin. */
export async function keyscan(host: Host, timeoutS = 10): Promise<string[]> {
  const p = Bun.spawn(["ssh-keyscan", "-T", String(timeoutS), "-p", String(host.ssh.port), host.ssh.host], {
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return out
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"))
    .map((l) => l.split(/\s+/).slice(1, 3).join(" "));
}

export interface KnownHosts {
  /** The file ssh reads (UserKnownHostsFile): the keys of every host pinned so far, nothing else. */
  file: string;
  /** Adds `host`'s pinned keys to the file; resolves to the reason it is refused, or undefined. */
  pin(host: Host): Promise<string | undefined>;
}

/** A known_hosts file at `file` (made empty) that holds only the inventory's pinned keys. */
export function createKnownHosts(file: string, scan: (host: Host) => Promise<string[]> = keyscan): KnownHosts {
  writeFileSync(file, "", { mode: 0o600 });
  return {
    file,
    async pin(host) {
      if (!host.hostKeys.length) return `${host.name}: no hostKeys in the inventory: refused, nothing was run on it`;
      try {
        const scanned = host.hostKeys.some((k) => k.startsWith("SHA256:")) ? await scan(host) : [];
        appendFileSync(file, `${pinnedLines(host, scanned).join("\n")}\n`);
        return undefined;
      } catch (err) {
        return (err as Error).message;
      }
    },
  };
}
