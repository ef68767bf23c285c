// The load balancers' waits (lb-haproxy.ts, lb-hetzner.ts).

/** Polls `probe` every `everyMs` until it returns a value or `timeoutMs` passes (then undefined). */
export async function poll<T>(
  probe: () => Promise<T | undefined>,
  timeoutMs: number,
  everyMs: number,
  sleep: (ms: number) => Promise<void>,
): Promise<T | undefined> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() >= until) return undefined;
    await sleep(everyMs);
  }
}
