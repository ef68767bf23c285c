// A client of the rehearsal's load balancer: HTTPS to the LB's address, trusting the internal CA
// (Hetzner's managed certificate in production), with the API key: submit a task, wait for it.
// A client of the shared name (`dns`) resolves it through the failover name server (dns-server.ts)
// as a stub resolver would, keeps the answer for its TTL, and tries its addresses in order.
import { Resolver } from "node:dns/promises";

export interface LbClient {
  /** `https://<LB address>`, or `https://<shared name>` with `dns`. */
  url: string;
  ca: string;
  apiKey: string;
  dns?: NameLookup;
}

export interface NameLookup {
  /** The addresses the name resolves to now (cached for the answer's TTL). */
  addresses(): Promise<string[]>;
}

/** Lookups of `url`'s host name at the name server `server` (`ip` or `ip:port`). */
export function nameLookup(server: string, name: string): NameLookup {
  const resolver = new Resolver({ timeout: 1000, tries: 2 });
  resolver.setServers([server]);
  let cached: { addresses: string[]; until: number } | undefined;
  return {
    async addresses() {
      if (cached && Date.now() < cached.until) return cached.addresses;
      const records = await resolver.resolve4(name, { ttl: true });
      const ttl = Math.min(...records.map((r) => r.ttl));
      cached = { addresses: records.map((r) => r.address), until: Date.now() + ttl * 1000 };
      return cached.addresses;
    },
  };
}

export interface LbRequest {
  method?: string;
  body?: unknown;
  headers?: Record<string, string>;
  timeoutMs?: number;
}

/**
 * One request through the LB: to `url`, or (with `dns`) to each address of the name in turn until
 * one connects (the TLS name checked is the shared name's either way).
 */
export async function lbFetch(c: LbClient, path: string, init: LbRequest = {}): Promise<Response> {
  const request = (url: string, serverName?: string) =>
    fetch(url, {
      method: init.method ?? "GET",
      headers: {
        authorization: `Bearer ${c.apiKey}`,
        ...(init.body ? { "content-type": "application/json" } : {}),
        ...(serverName ? { host: serverName } : {}),
        ...init.headers,
      },
      body: init.body ? JSON.stringify(init.body) : undefined,
      signal: AbortSignal.timeout(init.timeoutMs ?? 15_000),
      tls: { ca: c.ca, ...(serverName ? { serverName } : {}) },
    } as RequestInit);
  if (!c.dns) return request(`${c.url}${path}`);
  const name = new URL(c.url).hostname;
  let last: unknown;
  for (const address of await c.dns.addresses()) {
    try {
      return await request(`https://${address}${path}`, name);
    } catch (err) {
      last = err;
    }
  }
  throw last ?? new Error(`${name}: no address`);
}

/** One request; the body parsed as JSON (the text when it is not), and the address that answered. */
export async function call<T>(
  c: LbClient,
  path: string,
  init: LbRequest = {},
): Promise<{ status: number; body: T; address?: string }> {
  const res = await lbFetch(c, path, init);
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: res.status, body: body as T, ...(res.url ? { address: new URL(res.url).hostname } : {}) };
}

export const readyz = (c: LbClient) =>
  call<unknown>(c, "/readyz", { timeoutMs: 5000 }).then(
    (r) => r.status,
    () => 0,
  );

export interface TaskResult {
  id: string;
  status: string;
  ms: number;
  submitStatus: number;
}

/** Submits one task through the LB and long-polls it to a final status; the round trip in ms. */
export async function roundTrip(c: LbClient, tag: string, timeoutMs = 90_000): Promise<TaskResult> {
  const t0 = Date.now();
  const sub = await call<{ id: string; status: string }>(c, "/v1/tasks", {
    method: "POST",
    body: {
      type: "turnstile",
      params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/rehearsal/${tag}` },
    },
    headers: { "idempotency-key": `rehearsal-${tag}` },
  });
  if (sub.status !== 202)
    throw new Error(`POST /v1/tasks through the LB: ${sub.status} ${JSON.stringify(sub.body).slice(0, 300)}`);
  const id = sub.body.id;
  for (;;) {
    const got = await call<{ status: string }>(c, `/v1/tasks/${id}?wait=20`, { timeoutMs: 30_000 });
    if (got.status !== 200)
      throw new Error(`GET /v1/tasks/${id}: ${got.status} ${JSON.stringify(got.body).slice(0, 300)}`);
    if (["completed", "failed", "cancelled", "expired"].includes(got.body.status))
      return { id, status: got.body.status, ms: Date.now() - t0, submitStatus: sub.status };
    if (Date.now() - t0 > timeoutMs) throw new Error(`task ${id} still ${got.body.status} after ${timeoutMs} ms`);
  }
}
