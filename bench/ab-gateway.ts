// `bun bench/ab-gateway.ts <checkout A> <checkout B>`: the gateway's CPU per submission of two
// checkouts, paired. Both gateway apps (createApp with the production parts: Postgres store,
// JetStream queue, quotas, metrics) run in this one process, each on a database and a
// nats-server of its own, and take turns: rounds of N submissions through `app.fetch` (32 at a
// time, no HTTP listener), alternating which goes first. The figure is the median of the paired
// differences (B - A) of this process's CPU per submission.
//
// Why: on this shared 2-CPU machine two runs of the same code differ by 10-20%; a change worth
// 5-10 µs per submission (of ~170) shows only when the two sides run interleaved, in one process
// (same JIT state, same neighbours). A null comparison (the same checkout twice) gave -1.5 µs at
// 30 rounds; 10 rounds gave -3 and +10 µs: use 30 for anything under ~15 µs.
//
//   git worktree add /tmp/base <rev> && (cd /tmp/base && bun install --frozen-lockfile)
//   AB_ROUNDS=30 bun bench/ab-gateway.ts /tmp/base .
//
// Settings: AB_ROUNDS (10), AB_TASKS per round (3000), AB_WARMUP per side (15000).
import { resolve } from "node:path";
import { envCount } from "./support/context.ts";

const roots = process.argv.slice(2).map((p) => resolve(p));
if (roots.length !== 2) throw new Error("usage: bun bench/ab-gateway.ts <checkout A> <checkout B>");
const rounds = envCount("AB_ROUNDS", 10);
const perRound = envCount("AB_TASKS", 3000);
const warmup = envCount("AB_WARMUP", 15_000);
process.env.API_KEYS_ALLOW_SHORT = "1";
process.env.PIPELINE_ENV = "dev";

type App = { fetch(req: Request): Response | Promise<Response> };

/** One checkout's gateway app, wired as service.ts wires it, on a stack of its own. */
async function gatewayOf(root: string, region: string): Promise<{ app: App; close(): Promise<void> }> {
  const mod = (path: string) => import(`${root}/${path}`);
  // The stack moved to testing/ (issue 35): a checkout from before has it in http/.
  const { startGatewayTestStack } = await mod("apps/gateway/src/testing/stack.ts").catch(() =>
    mod("apps/gateway/src/http/test-stack.ts"),
  );
  const { createApp } = await mod("apps/gateway/src/http/app.ts");
  const { createTaskStore } = await mod("apps/gateway/src/adapters/pg.ts");
  const { createTaskQueue, createTaskWatcher } = await mod("apps/gateway/src/adapters/nats.ts");
  const { createApiKeys } = await mod("apps/gateway/src/domain/api-keys.ts");
  const { createGatewayMetrics } = await mod("apps/gateway/src/adapters/metrics.ts");
  const { createQuotas } = await mod("apps/gateway/src/domain/quotas.ts");
  const { createUsageSource } = await mod("apps/gateway/src/adapters/usage.ts");
  const { createLogger } = await mod("packages/shared/src/log.ts");
  const stack = await startGatewayTestStack(region);
  const apiKeys = createApiKeys(["client-a-key"]);
  const app = createApp({
    config: {
      REGION: region,
      MAX_BODY_BYTES: 64 * 1024,
      IMAGE_MAX_BYTES: 4096,
      MAX_WAIT_SECONDS: 5,
      TASK_DEADLINE_MS: 600_000,
    },
    store: createTaskStore(stack.database.db),
    queue: createTaskQueue(stack.gw, region, 2000),
    watcher: createTaskWatcher(stack.gw, region),
    apiKeys,
    metrics: createGatewayMetrics(stack.database.db),
    quotas: createQuotas({ source: createUsageSource(stack.database.db), ownersOf: apiKeys.ownersOf }),
    log: createLogger(region, { level: "warn" }),
  }) as App;
  return { app, close: () => stack.close() };
}

const sides = [await gatewayOf(roots[0]!, "ab_a"), await gatewayOf(roots[1]!, "ab_b")];
const run = `ab-${Date.now()}`;
let next = 0;
async function submit(app: App, i: number): Promise<void> {
  const body = JSON.stringify({
    type: "turnstile",
    params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://bench.example.com/${run}/${i}` },
  });
  const headers = {
    authorization: "Bearer client-a-key",
    "content-type": "application/json",
    "idempotency-key": `${run}-${i}`,
    "content-length": String(body.length),
  };
  const res = await app.fetch(new Request("http://gateway/v1/tasks", { method: "POST", headers, body }));
  if (res.status !== 202) throw new Error(`POST /v1/tasks answered ${res.status}: ${(await res.text()).slice(0, 200)}`);
  await res.json();
}
async function burst(app: App, n: number): Promise<void> {
  const end = next + n;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next < end) await submit(app, next++);
    }),
  );
}

try {
  for (const s of sides) await burst(s.app, warmup);
  const cpu: number[][] = [[], []];
  for (let r = 0; r < rounds; r++) {
    for (const k of [0, 1]) {
      const side = (k + r) % 2;
      const t0 = process.cpuUsage();
      await burst(sides[side]!.app, perRound);
      const t = process.cpuUsage(t0);
      cpu[side]!.push((t.user + t.system) / perRound);
    }
  }
  const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
  for (const side of [0, 1])
    console.log(
      `${"AB"[side]} ${roots[side]}: median ${median(cpu[side]!).toFixed(1)} µs of CPU per submission (${rounds} rounds of ${perRound})`,
    );
  console.log(
    `paired difference B - A: median ${median(cpu[1]!.map((b, i) => b - cpu[0]![i]!)).toFixed(1)} µs per submission`,
  );
} finally {
  for (const s of sides) await s.close();
}
process.exit(0);
