// A client of the rehearsal's load balancer: HTTPS to the LB's address, trusting the internal CA
// (Hetzner's managed certificate in production), with the API key: submit a task, wait for it.
export interface LbClient {
  url: string;
  ca: string;
  apiKey: string;
}

async function call<T>(
  c: LbClient,
  path: string,
  init: { method?: string; body?: unknown; headers?: Record<string, string>; timeoutMs?: number } = {},
): Promise<{ status: number; body: T }> {
  const res = await fetch(`${c.url}${path}`, {
    method: init.method ?? "GET",
    headers: {
      authorization: `Bearer ${c.apiKey}`,
      ...(init.body ? { "content-type": "application/json" } : {}),
      ...init.headers,
    },
    body: init.body ? JSON.stringify(init.body) : undefined,
    signal: AbortSignal.timeout(init.timeoutMs ?? 15_000),
    tls: { ca: c.ca },
  } as RequestInit);
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: res.status, body: body as T };
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
