import type { LookupAddress, LookupOptions } from "node:dns";
import { lookup } from "node:dns/promises";
import http from "node:http";
import https from "node:https";
import type { ResolvedAddress } from "@pipeline/shared/net";

/** Every address a host name resolves to (all of them are checked, not just the first). */
export type Resolve = (host: string) => Promise<ResolvedAddress[]>;

/** The system resolver (getaddrinfo, as an HTTP client would use), every answer in its order. */
export const systemResolve: Resolve = async (host) =>
  (await lookup(host, { all: true, order: "verbatim" })).map((a) => ({ address: a.address, family: a.family }));

export interface CallbackRequest {
  /** The callback URL: its host goes into the Host header and TLS (SNI and certificate check). */
  url: URL;
  /** The checked address the connection goes to, whatever DNS says by then. */
  address: string;
  family: 4 | 6;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
}

/** Sends one callback; resolves with the receiver's status, rejects on a transport failure or the timeout. */
export type PostCallback = (req: CallbackRequest) => Promise<{ status: number }>;

const MAX_RESPONSE_BYTES = 64 * 1024;

/**
 * POSTs to the address that was checked, not to a fresh DNS answer: the connection's `lookup`
 * returns the pinned address, while the URL's host name still goes into the Host header, SNI
 * and the certificate check (a TLS receiver is verified against its name, as with any client).
 * node:http is used rather than fetch for that hook, and because it ignores HTTP(S)_PROXY (a
 * proxy would resolve the name again). Redirects are never followed; the response body is
 * drained up to 64 kB and otherwise ignored. `ca` is for tests with their own TLS receiver.
 */
export function pinnedPost(opts: { ca?: string } = {}): PostCallback {
  return (req) =>
    new Promise((resolve, reject) => {
      const client = req.url.protocol === "https:" ? https : http;
      const pinned = (
        _host: string,
        o: LookupOptions,
        cb: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
      ) => {
        if (o?.all) cb(null, [{ address: req.address, family: req.family }]);
        else cb(null, req.address, req.family);
      };
      let settled = false;
      const r = client.request(
        req.url,
        {
          method: "POST",
          headers: { ...req.headers, "content-length": String(Buffer.byteLength(req.body)) },
          lookup: pinned,
          agent: false,
          ...(opts.ca ? { ca: opts.ca } : {}),
        },
        (res) => {
          settled = true;
          resolve({ status: res.statusCode ?? 0 });
          let seen = 0;
          res.on("data", (chunk: Buffer) => {
            seen += chunk.length;
            if (seen > MAX_RESPONSE_BYTES) res.destroy();
          });
          res.on("error", () => {});
          res.on("close", () => clearTimeout(timer));
        },
      );
      const timer = setTimeout(() => r.destroy(new Error(`timed out after ${req.timeoutMs} ms`)), req.timeoutMs);
      r.on("error", (err) => {
        clearTimeout(timer);
        if (!settled) reject(err);
      });
      r.end(req.body);
    });
}
