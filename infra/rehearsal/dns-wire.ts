// The DNS messages the rehearsal's failover name server reads and writes (RFC 1035, section 4):
// one question in, an authoritative answer out with A records for the shared name. Pure.

export interface DnsQuestion {
  id: number;
  /** The query's flags as sent (RD is copied into the answer). */
  flags: number;
  /** Lower-cased, without the trailing dot. */
  name: string;
  type: number;
  class: number;
  /** The question section's bytes (echoed in the answer). */
  raw: Uint8Array;
}

export const TYPE_A = 1;
export const CLASS_IN = 1;
export const RCODE = { noError: 0, formErr: 1, nxDomain: 3, notImp: 4, refused: 5 } as const;

/** The first question of a query; undefined when the message is not one (too short, a response, bad labels). */
export function parseQuestion(msg: Uint8Array): DnsQuestion | undefined {
  if (msg.length < 12) return undefined;
  const view = new DataView(msg.buffer, msg.byteOffset, msg.byteLength);
  const flags = view.getUint16(2);
  if (flags & 0x8000 || view.getUint16(4) < 1) return undefined;
  const labels: string[] = [];
  let at = 12;
  for (;;) {
    const len = msg[at];
    if (len === undefined || len > 63) return undefined;
    at += 1;
    if (len === 0) break;
    if (at + len > msg.length) return undefined;
    labels.push(new TextDecoder().decode(msg.subarray(at, at + len)).toLowerCase());
    at += len;
  }
  if (at + 4 > msg.length) return undefined;
  return {
    id: view.getUint16(0),
    flags,
    name: labels.join("."),
    type: view.getUint16(at),
    class: view.getUint16(at + 2),
    raw: msg.subarray(12, at + 4),
  };
}

/** The answer to `q`: `addresses` as A records of TTL `ttl` s (none with a non-zero rcode). */
export function encodeAnswer(q: DnsQuestion, rcode: number, addresses: string[] = [], ttl = 5): Uint8Array {
  const answers = rcode === RCODE.noError ? addresses : [];
  const out = new Uint8Array(12 + q.raw.length + answers.length * 16);
  const view = new DataView(out.buffer);
  view.setUint16(0, q.id);
  // QR, AA, the query's opcode and RD; RA 0 (no recursion here); the rcode.
  view.setUint16(2, 0x8000 | 0x0400 | (q.flags & 0x7900) | (rcode & 0xf));
  view.setUint16(4, 1);
  view.setUint16(6, answers.length);
  out.set(q.raw, 12);
  let at = 12 + q.raw.length;
  for (const a of answers) {
    const octets = a.split(".").map(Number);
    if (octets.length !== 4 || octets.some((o) => !Number.isInteger(o) || o < 0 || o > 255))
      throw new Error(`not an IPv4 address: ${a}`);
    view.setUint16(at, 0xc00c); // the name: a pointer to the question's
    view.setUint16(at + 2, TYPE_A);
    view.setUint16(at + 4, CLASS_IN);
    view.setUint32(at + 6, ttl);
    view.setUint16(at + 10, 4);
    out.set(octets, at + 12);
    at += 16;
  }
  return out;
}

/**
 * What the server says to a question: A records for `name`, an empty answer for its other types,
 * NXDOMAIN for other names of the zone, REFUSED outside it (it is authoritative for one zone and
 * resolves nothing else), NOTIMP for an opcode other than a query.
 */
export function respond(q: DnsQuestion, zone: string, name: string, addresses: string[], ttl: number): Uint8Array {
  if ((q.flags >> 11) & 0xf) return encodeAnswer(q, RCODE.notImp);
  if (q.name !== zone && !q.name.endsWith(`.${zone}`)) return encodeAnswer(q, RCODE.refused);
  if (q.name !== name) return encodeAnswer(q, RCODE.nxDomain);
  if (q.type !== TYPE_A || q.class !== CLASS_IN) return encodeAnswer(q, RCODE.noError);
  return encodeAnswer(q, RCODE.noError, addresses, ttl);
}
