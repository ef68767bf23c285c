/**
 * Bun hands the fetch handler a request whose `url` is only the path ("/readyz") when the client
 * sent no Host header, as an HTTP/1.0 request may (HAProxy's default health check). Hono finds the
 * path by skipping the scheme and authority of an absolute URL (the first "/" from the 9th
 * character on), so "/readyz" became the path "z": `404 no route GET z`. Such a request is given an
 * absolute URL on `fallbackHost` (the listener's own address) before the app sees it.
 */
export function withAbsoluteUrl(
  fetch: (req: Request) => Response | Promise<Response>,
  fallbackHost = "localhost",
): (req: Request) => Response | Promise<Response> {
  return (req) => {
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(req.url)) return fetch(req);
    return fetch(new Request(new URL(req.url, `http://${fallbackHost}`).href, req));
  };
}
