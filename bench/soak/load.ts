// The soak's client: offers `rate` tasks a second through @pipeline/client (our REST client, with
// its retries and Idempotency-Keys), each a turnstile task with a page URL of its own, until told
// to stop; remembers every accepted task id and every offer the client gave up on.
import { type Client, createClient } from "@pipeline/client";

export interface Load {
  offered(): number;
  accepted(): string[];
  /** Offers the client gave up on, with the last error's message. */
  givenUp(): string[];
  client: Client;
  /** Stops offering; resolves once every offer in flight is answered or given up. */
  stop(): Promise<void>;
}

export function startLoad(o: { gatewayUrl: string; apiKey: string; rate: number; run: string }): Load {
  // Retries outlast a gateway restart (a few seconds down): 12 tries, backoff up to 3 s.
  const client = createClient({
    regions: [o.gatewayUrl],
    apiKey: o.apiKey,
    timeoutMs: 10_000,
    retry: { attempts: 12, baseMs: 200, maxMs: 3000 },
  });
  const accepted: string[] = [];
  const givenUp: string[] = [];
  const inFlight = new Set<Promise<void>>();
  let offered = 0;
  const t0 = performance.now();
  const offer = (i: number) => {
    const p = client
      .submit({
        type: "turnstile",
        params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://soak.example.com/${o.run}/${i}` },
      })
      .then(
        (r) => void accepted.push(r.id),
        (err: Error) => void givenUp.push(`${i}: ${err.message}`),
      )
      .finally(() => inFlight.delete(p));
    inFlight.add(p);
  };
  // A tick every 50 ms offers what the schedule says is due by then: the rate holds on a busy machine.
  const timer = setInterval(() => {
    const due = Math.floor(((performance.now() - t0) / 1000) * o.rate);
    while (offered < due) offer(offered++);
  }, 50);
  return {
    offered: () => offered,
    accepted: () => accepted,
    givenUp: () => givenUp,
    client,
    async stop() {
      clearInterval(timer);
      while (inFlight.size) await Promise.all([...inFlight]);
    },
  };
}
