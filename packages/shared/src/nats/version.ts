// The nats-server versions the project runs on, as plain functions: `recovery assess` warns below
// MIN_NATS_SERVER, and the dev tooling (@pipeline/devstack) fetches a server of at least it.
// See docs/nats.md for why 2.14.

/** The oldest server the project runs on (reliable WorkQueue sourcing, +TERM reasons, consumer reset). */
export const MIN_NATS_SERVER = "2.14.0";

/** `[major, minor, patch]` of a `nats-server --version` line or a Debian version (`2.15.1-1`). */
export function parseServerVersion(text: string): [number, number, number] | undefined {
  const m = /(\d+)\.(\d+)\.(\d+)/.exec(text);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined;
}

/** True when version `a` is at least `b`. */
export function versionAtLeast(a: string, b: string): boolean {
  const x = parseServerVersion(a);
  const y = parseServerVersion(b);
  if (!x || !y) return false;
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i]! > y[i]!;
  return true;
}
