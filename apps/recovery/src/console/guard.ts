// The console's request checks before any sign-in (issue 34), pure: the Host header against the
// console's names (DNS rebinding), the origin of every state-changing request (CSRF from a page on
// another origin, including another port of the same host, which SameSite does not stop), and
// whether the session cookie must be Secure.
import { normalHostName } from "../config.ts";

/** The name of a Host header without its port (IPv6 without brackets), lower case; undefined when malformed. */
export function hostNameOf(host: string | undefined): string | undefined {
  if (!host) return undefined;
  const h = host.trim();
  const v6 = /^\[([0-9a-fA-F:.]+)\](:\d{1,5})?$/.exec(h);
  if (v6) return normalHostName(v6[1]!);
  const named = /^([A-Za-z0-9.-]+)(:\d{1,5})?$/.exec(h);
  return named ? normalHostName(named[1]!) : undefined;
}

/** Whether the Host header names one of the console's names (port aside). */
export function allowedHost(host: string | undefined, names: readonly string[]): boolean {
  const name = hostNameOf(host);
  return name !== undefined && names.includes(name);
}

export interface OriginFacts {
  /** The Origin header, if any. */
  origin: string | undefined;
  /** The Sec-Fetch-Site header, if any. */
  fetchSite: string | undefined;
  /** The Host header (already checked against the console's names). */
  host: string | undefined;
  /** The request authenticates with `Authorization: Bearer` (a script: no ambient credential a page could borrow). */
  bearer: boolean;
}

/**
 * Whether a state-changing request comes from the console's own origin. Sec-Fetch-Site, when
 * sent, must say same-origin. An Origin header must be http(s)://<the Host header>, port
 * included; `Origin: null` (what the console's own page sends under its Referrer-Policy
 * no-referrer) counts as absent. Without an Origin: Sec-Fetch-Site same-origin passes, and with
 * neither header only a Bearer request (a script). Browsers send Sec-Fetch-Site (which a page
 * cannot set) or a real Origin with a POST, so a page elsewhere cannot pass.
 */
export function sameOrigin(f: OriginFacts): boolean {
  if (f.fetchSite !== undefined && f.fetchSite !== "same-origin") return false;
  if (f.origin !== undefined && f.origin !== "null") {
    if (!f.host) return false;
    let u: URL;
    try {
      u = new URL(f.origin);
    } catch {
      return false;
    }
    return (
      (u.protocol === "http:" || u.protocol === "https:") &&
      u.origin === f.origin.toLowerCase() &&
      u.host === f.host.trim().toLowerCase()
    );
  }
  return f.fetchSite === "same-origin" || (f.origin === undefined && f.bearer);
}

/** Whether an address is a loopback one (127.0.0.0/8, ::1, localhost). */
export function isLoopback(address: string): boolean {
  const a = normalHostName(address);
  return a === "localhost" || a === "::1" || /^(::ffff:)?127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(a);
}

/**
 * Whether the session cookie carries Secure: always when CONSOLE_COOKIE_SECURE=always or the
 * request came over TLS, and whenever the console listens beyond loopback (CONSOLE_HOST not a
 * loopback address, the wildcards included).
 */
export function secureCookie(o: { consoleHost: string; mode: "auto" | "always"; protocol: string }): boolean {
  return o.mode === "always" || o.protocol === "https:" || !isLoopback(o.consoleHost);
}
