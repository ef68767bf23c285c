/**
 * IP address parsing and classification, without I/O: what kind of network an address belongs
 * to, so that callbacks are never sent into the pipeline's own network (see callback-url.ts and
 * docs/security.md).
 */

/**
 * The kind of an address. `public` is the only one a callback may reach by default;
 * `loopback`, `private` (RFC 1918, site-local, NAT64 local-use), `cgnat` (100.64/10) and `ula`
 * (fc00::/7) are allowed with WEBHOOK_ALLOW_PRIVATE=1; the others never.
 */
export type AddressClass =
  | "public"
  | "loopback"
  | "private"
  | "cgnat"
  | "ula"
  | "link-local"
  | "multicast"
  | "unspecified"
  | "reserved";

/** Classes WEBHOOK_ALLOW_PRIVATE=1 lets through (dev stacks and tests send to 127.0.0.1). */
export const PRIVATE_CLASSES: ReadonlySet<AddressClass> = new Set(["loopback", "private", "cgnat", "ula"]);

/** Dotted-decimal IPv4 (`1.2.3.4`, the form URL parsing and DNS answers give) to 4 bytes. */
export function parseIPv4(s: string): number[] | undefined {
  const parts = s.split(".");
  if (parts.length !== 4) return undefined;
  const out: number[] = [];
  for (const p of parts) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p)) return undefined;
    const n = Number(p);
    if (n > 255) return undefined;
    out.push(n);
  }
  return out;
}

/** IPv6 text (`::1`, `fe80::1%eth0`, `::ffff:1.2.3.4`, with or without brackets) to 16 bytes. */
export function parseIPv6(input: string): number[] | undefined {
  let s = input.startsWith("[") && input.endsWith("]") ? input.slice(1, -1) : input;
  const zone = s.indexOf("%");
  if (zone >= 0) s = s.slice(0, zone);
  if (!s.includes(":") || !/^[0-9a-fA-F:.]+$/.test(s)) return undefined;
  const lastColon = s.lastIndexOf(":");
  const last = s.slice(lastColon + 1);
  if (last.includes(".")) {
    // A trailing dotted quad stands for the last two groups.
    const v4 = parseIPv4(last);
    if (!v4) return undefined;
    s = `${s.slice(0, lastColon + 1)}${((v4[0]! << 8) | v4[1]!).toString(16)}:${((v4[2]! << 8) | v4[3]!).toString(16)}`;
  }
  const halves = s.split("::");
  if (halves.length > 2) return undefined;
  const groups = (h: string) => (h === "" ? [] : h.split(":"));
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  const all = [...head, ...tail];
  if (all.some((g) => !/^[0-9a-fA-F]{1,4}$/.test(g))) return undefined;
  if (halves.length === 1 ? all.length !== 8 : all.length > 7) return undefined;
  const words = [...head, ...Array<string>(8 - all.length).fill("0"), ...tail].map((g) => parseInt(g, 16));
  return words.flatMap((w) => [w >> 8, w & 0xff]);
}

/** 4 bytes for IPv4, 16 for IPv6, undefined when `s` is not an IP address. */
export function parseIp(s: string): number[] | undefined {
  return parseIPv4(s) ?? parseIPv6(s);
}

type Range = { bytes: number[]; bits: number; cls: AddressClass };
const range = (cidr: string, cls: AddressClass): Range => {
  const [addr, bits] = cidr.split("/") as [string, string];
  const bytes = parseIp(addr);
  if (!bytes) throw new Error(`bad range ${cidr}`);
  return { bytes, bits: Number(bits), cls };
};
const inRange = (b: number[], r: Range) => {
  if (b.length !== r.bytes.length) return false;
  for (let i = 0; i < r.bits; i++) {
    const bit = (x: number[]) => (x[i >> 3]! >> (7 - (i & 7))) & 1;
    if (bit(b) !== bit(r.bytes)) return false;
  }
  return true;
};

// IANA special-purpose registries (RFC 6890 and successors). First match wins.
const V4: Range[] = [
  range("0.0.0.0/8", "unspecified"), // "this network"; 0.0.0.0 reaches the local host on Linux
  range("10.0.0.0/8", "private"),
  range("100.64.0.0/10", "cgnat"),
  range("127.0.0.0/8", "loopback"),
  range("169.254.0.0/16", "link-local"), // cloud metadata (169.254.169.254) lives here
  range("172.16.0.0/12", "private"),
  range("192.0.0.0/24", "reserved"),
  range("192.0.2.0/24", "reserved"),
  range("192.88.99.0/24", "reserved"),
  range("192.168.0.0/16", "private"),
  range("198.18.0.0/15", "reserved"),
  range("198.51.100.0/24", "reserved"),
  range("203.0.113.0/24", "reserved"),
  range("224.0.0.0/4", "multicast"),
  range("240.0.0.0/4", "reserved"), // includes 255.255.255.255
];
const V6: Range[] = [
  range("::/128", "unspecified"),
  range("::1/128", "loopback"),
  range("64:ff9b:1::/48", "private"), // NAT64 local use
  range("100::/64", "reserved"),
  range("2001::/23", "reserved"), // IETF protocol assignments: Teredo, ORCHID, benchmarking...
  range("2001:db8::/32", "reserved"),
  range("fc00::/7", "ula"),
  range("fe80::/10", "link-local"),
  range("fec0::/10", "private"), // deprecated site-local
  range("ff00::/8", "multicast"),
];
const GLOBAL_UNICAST = range("2000::/3", "public");

/** The IPv4 address an IPv6 address carries and stands for, if any. */
function embeddedV4(b: number[]): number[] | undefined {
  const zero = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  if (zero(0, 10) && b[10] === 0xff && b[11] === 0xff) return b.slice(12); // ::ffff:a.b.c.d (IPv4-mapped)
  if (zero(0, 10) && b[10] === 0 && b[11] === 0 && !zero(12, 16) && !(zero(12, 15) && b[15] === 1)) return b.slice(12); // ::a.b.c.d (IPv4-compatible, deprecated)
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zero(4, 12)) return b.slice(12); // 64:ff9b::/96 (NAT64)
  if (b[0] === 0x20 && b[1] === 0x02) return b.slice(2, 6); // 2002::/16 (6to4)
  return undefined;
}

function classifyBytes(b: number[]): AddressClass {
  if (b.length === 4) return V4.find((r) => inRange(b, r))?.cls ?? "public";
  const v4 = embeddedV4(b);
  if (v4) return classifyBytes(v4);
  const hit = V6.find((r) => inRange(b, r));
  if (hit) return hit.cls;
  return inRange(b, GLOBAL_UNICAST) ? "public" : "reserved";
}

/** The class of an IP address, or undefined when `ip` is not one (a host name). */
export function classifyIp(ip: string): AddressClass | undefined {
  const b = parseIp(ip);
  return b ? classifyBytes(b) : undefined;
}

/** 4 or 6 for an IP address, 0 for anything else. */
export function ipFamily(ip: string): 0 | 4 | 6 {
  if (parseIPv4(ip)) return 4;
  return parseIPv6(ip) ? 6 : 0;
}
