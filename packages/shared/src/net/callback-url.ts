/**
 * Where the pipeline may send a task's callback (SSRF defence; threat model in
 * docs/security.md). Pure: no DNS, no clock. The gateway checks a `callbackUrl` with
 * `checkCallbackUrl` at submit; the solver checks it again at send time, resolves the host and
 * checks every answer with `checkResolvedAddresses`, then connects to the address it checked.
 */
import { type AddressClass, classifyIp, ipFamily, PRIVATE_CLASSES } from "./ip.ts";

export interface CallbackPolicy {
  /** WEBHOOK_ALLOW_HTTP=1: `http:` as well as `https:`. */
  allowHttp: boolean;
  /** WEBHOOK_ALLOW_PRIVATE=1: loopback, RFC 1918, CGNAT and ULA addresses (dev stacks and tests only). */
  allowPrivate: boolean;
}

/** https only, public addresses only: the production policy and the default. */
export const STRICT_CALLBACK_POLICY: CallbackPolicy = Object.freeze({ allowHttp: false, allowPrivate: false });

export const CALLBACK_URL_MAX_LENGTH = 2048;

export interface CallbackTarget {
  /** The URL as the WHATWG parser normalized it (what fetch/http would use). */
  url: URL;
  /** The host name or IP address, without IPv6 brackets or a trailing dot. */
  host: string;
  /** Set when the host is an IP address literal (already checked): connect to it, no DNS. */
  literal?: { address: string; family: 4 | 6 };
}

export type CallbackCheck = { ok: true; target: CallbackTarget } | { ok: false; reason: string };

const CLASS_TEXT: Record<AddressClass, string> = {
  public: "a public address",
  loopback: "a loopback address",
  private: "a private network address",
  cgnat: "a carrier-grade NAT address (100.64.0.0/10)",
  ula: "a unique local IPv6 address (fc00::/7)",
  "link-local": "a link-local address",
  multicast: "a multicast address",
  unspecified: "an unspecified address",
  reserved: "a reserved or special-purpose address",
};

/** True when the policy lets a callback reach an address of this class. */
export function addressClassAllowed(cls: AddressClass, policy: CallbackPolicy): boolean {
  return cls === "public" || (policy.allowPrivate && PRIVATE_CLASSES.has(cls));
}

/** Names that mean this host or an internal network whatever DNS says. */
function nameClass(host: string): AddressClass | undefined {
  if (host === "localhost" || host.endsWith(".localhost")) return "loopback";
  // Single-label names resolve through the search domains to internal hosts (`http://metadata/`).
  if (!host.includes(".")) return "private";
  if (/\.(local|internal|localdomain|home\.arpa)$/.test(host)) return "private";
  return undefined;
}

/**
 * Checks a callback URL against the policy. It relies on the WHATWG URL parser, which turns
 * every IPv4 spelling (`2130706433`, `0x7f000001`, `0177.0.0.1`, `127.1`, `127.0.0.1.`) into
 * dotted decimal, and every IPv6 one into its canonical text, before the address is classified;
 * the solver's HTTP client parses the URL the same way. The reason never repeats the URL (its
 * query may hold a receiver's secret).
 */
export function checkCallbackUrl(raw: unknown, policy: CallbackPolicy = STRICT_CALLBACK_POLICY): CallbackCheck {
  if (typeof raw !== "string") return { ok: false, reason: "must be a string" };
  if (raw.length > CALLBACK_URL_MAX_LENGTH)
    return { ok: false, reason: `must be at most ${CALLBACK_URL_MAX_LENGTH} characters` };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: policy.allowHttp ? "must be an http(s) URL" : "must be an https URL" };
  }
  if (url.protocol !== "https:" && !(policy.allowHttp && url.protocol === "http:"))
    return { ok: false, reason: policy.allowHttp ? "must be an http(s) URL" : "must be an https URL" };
  if (url.username !== "" || url.password !== "")
    return { ok: false, reason: "must not carry a user name or password" };
  let host = url.hostname.toLowerCase();
  if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1);
  if (host.endsWith(".")) host = host.slice(0, -1);
  if (host === "") return { ok: false, reason: "must name a host" };
  const family = ipFamily(host);
  const cls = family ? classifyIp(host)! : nameClass(host);
  if (cls && !addressClassAllowed(cls, policy))
    return { ok: false, reason: `must not point to ${CLASS_TEXT[cls]}${family ? ` (${host})` : ""}` };
  return { ok: true, target: { url, host, ...(family ? { literal: { address: host, family } } : {}) } };
}

export interface ResolvedAddress {
  address: string;
  family: number;
}

export type ResolvedCheck =
  | { ok: true; address: string; family: 4 | 6; addresses: Array<{ address: string; family: 4 | 6 }> }
  | { ok: false; reason: string };

/**
 * Checks every address a host name resolved to: one answer the policy refuses refuses them all
 * (DNS rebinding answers a public and a private address, or changes between checks). The first
 * answer is the one to connect to; `addresses` are all of them, in order, for a client that falls
 * back to the next one when a connection fails.
 */
export function checkResolvedAddresses(
  answers: readonly ResolvedAddress[],
  policy: CallbackPolicy = STRICT_CALLBACK_POLICY,
): ResolvedCheck {
  if (answers.length === 0) return { ok: false, reason: "the host name has no address" };
  for (const a of answers) {
    const cls = classifyIp(a.address);
    if (!cls) return { ok: false, reason: "the host name resolved to something that is not an IP address" };
    if (!addressClassAllowed(cls, policy))
      return { ok: false, reason: `the host name resolves to ${CLASS_TEXT[cls]} (${a.address})` };
  }
  const addresses = answers.map((a) => ({ address: a.address, family: ipFamily(a.address) as 4 | 6 }));
  return { ok: true, ...addresses[0]!, addresses };
}

/**
 * The key the per-host in-flight cap counts by: `host[:port]` of the URL, lower-case; "" for a
 * URL that does not parse (it is refused when sent).
 */
export function callbackHostKey(raw: string): string {
  try {
    return new URL(raw).host.toLowerCase();
  } catch {
    return "";
  }
}
