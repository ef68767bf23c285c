/**
 * Address ranges (`10.0.1.5`, `10.0.1.0/24`, `fd00::/8`) and membership, without I/O: which peers
 * are the load balancers whose `X-Forwarded-For` the gateway believes.
 */
import { parseIp } from "./ip.ts";

/** An address range: its first bytes and the number of leading bits that must match. */
export interface Cidr {
  bytes: number[];
  bits: number;
  text: string;
}

/** `a.b.c.d`, `a.b.c.d/n`, an IPv6 address or `x::/n` to a range; undefined when it is none of these. */
export function parseCidr(s: string): Cidr | undefined {
  const [addr, bitsText, extra] = s.trim().split("/");
  if (extra !== undefined || !addr) return undefined;
  const bytes = parseIp(addr);
  if (!bytes) return undefined;
  const max = bytes.length * 8;
  if (bitsText !== undefined && !/^(0|[1-9][0-9]{0,2})$/.test(bitsText)) return undefined;
  const bits = bitsText === undefined ? max : Number(bitsText);
  if (bits > max) return undefined;
  return { bytes, bits, text: s.trim() };
}

/** The bytes of an address; an IPv4-mapped IPv6 one (`::ffff:10.0.0.2`, how dual-stack sockets report IPv4 peers) as its IPv4 bytes. */
function normalized(ip: string): number[] | undefined {
  const b = parseIp(ip);
  if (b && b.length === 16 && b.slice(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff)
    return b.slice(12);
  return b;
}

/** Whether `ip` (an address, IPv4-mapped accepted) lies in one of `ranges`. */
export function inAnyCidr(ip: string, ranges: readonly Cidr[]): boolean {
  const b = normalized(ip);
  if (!b) return false;
  return ranges.some((r) => {
    if (r.bytes.length !== b.length) return false;
    for (let i = 0; i < r.bits; i++)
      if (((b[i >> 3]! >> (7 - (i & 7))) & 1) !== ((r.bytes[i >> 3]! >> (7 - (i & 7))) & 1)) return false;
    return true;
  });
}
