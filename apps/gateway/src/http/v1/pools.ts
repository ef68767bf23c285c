import { formatMicros } from "@pipeline/shared/provider";
import { fieldErrors } from "@pipeline/shared/schemas";
import { type Context, Hono } from "hono";
import type { Pool, PoolStore } from "../../adapters/pools.ts";
import type { GatewayDeps } from "../../deps.ts";
import { PoolBody, PoolName, poolConfig, poolFigures } from "../../domain/pools.ts";
import { takeFromPool } from "../../tasks/pools.ts";
import type { Authenticator } from "../auth.ts";
import type { GatewayEnvVars } from "../env.ts";
import { ProblemError } from "../problem.ts";
import { idempotencyKeyOf, submitProblem } from "./problems.ts";

const money = (micros: number | null) => (micros === null ? null : formatMicros(micros));

/**
 * `/v1/pools`: the calling client's warm pools (docs/warm-pools.md). A pool belongs to the client
 * id that made it; another key's request for it is a 404, as for a task.
 */
export function poolsRoutes(deps: GatewayDeps, auth: Authenticator) {
  const app = new Hono<GatewayEnvVars>();
  app.use("*", async (c, next) => {
    // Views and takes carry tokens: no cache keeps one.
    c.header("cache-control", "no-store");
    c.set("clientId", auth.bearer(c));
    await next();
  });
  const store = () => {
    if (!deps.pools) throw new ProblemError(503, "Pools Unavailable", "this gateway keeps no warm pools");
    return deps.pools;
  };
  const view = (p: Pool) => poolView(deps, store(), p);
  app.get("/", async (c) => {
    const pools = await store().list(c.get("clientId"));
    return c.json({ pools: await Promise.all(pools.map(view)) });
  });
  app.put("/:name", async (c) => {
    const name = nameOf(c);
    const body = PoolBody.safeParse(await jsonBody(c));
    if (!body.success)
      throw new ProblemError(400, "Invalid Pool", "the pool does not match the schema", fieldErrors(body.error));
    const max = deps.config.POOL_MAX_PER_CLIENT ?? 20;
    const r = await store().put(c.get("clientId"), name, poolConfig(body.data), max);
    if ("limit" in r)
      throw new ProblemError(409, "Too Many Pools", `a client may keep at most ${r.limit} warm pools; delete one`, [
        { field: "path.name", message: `at most ${r.limit} pools per client (POOL_MAX_PER_CLIENT)` },
      ]);
    return c.json(await view(r.pool), r.created ? 201 : 200, { location: `/v1/pools/${name}` });
  });
  app.get("/:name", async (c) => c.json(await view(await ownPool(store(), c))));
  app.delete("/:name", async (c) => {
    const name = nameOf(c);
    const closed = await store().remove(c.get("clientId"), name);
    if (!closed) throw notFound(name);
    // Its figures at the close (its tasks still in flight finish, counted nowhere after this).
    return c.json({ ...(await view(closed)), deleted: true });
  });
  app.post("/:name/take", async (c) => {
    const key = idempotencyKeyOf(c.req.header("idempotency-key"));
    const pool = await ownPool(store(), c);
    try {
      const r = await takeFromPool({ ...deps, pools: store() }, pool, () => refuseMissWhenFenced(deps), key);
      if ("hit" in r) {
        const t = r.hit;
        return c.json(
          {
            pool: "hit",
            token: t.token,
            ...(t.userAgent ? { userAgent: t.userAgent } : {}),
            taskId: t.taskId,
            solvedAt: t.solvedAt.toISOString(),
            ageMs: Math.max(0, deps.now().getTime() - t.solvedAt.getTime()),
          },
          200,
          t.replayed ? { "idempotent-replayed": "true" } : {},
        );
      }
      return c.json({ id: r.miss.id, status: r.miss.status, pool: "miss" }, 202, {
        location: `/v1/tasks/${r.miss.id}`,
        ...(r.miss.replayed ? { "idempotent-replayed": "true" } : {}),
      });
    } catch (err) {
      throw submitProblem(err);
    }
  });
  return app;
}

function nameOf(c: Context<GatewayEnvVars>): string {
  const r = PoolName.safeParse(c.req.param("name"));
  if (!r.success) throw new ProblemError(400, "Invalid Pool Name", undefined, fieldErrors(r.error, "path.name"));
  return r.data;
}

const notFound = (name: string) => new ProblemError(404, "Not Found", `no warm pool named ${name}`);

async function ownPool(store: PoolStore, c: Context<GatewayEnvVars>): Promise<Pool> {
  const name = nameOf(c);
  const pool = await store.get(c.get("clientId"), name);
  if (!pool) throw notFound(name);
  return pool;
}

async function jsonBody(c: Context<GatewayEnvVars>): Promise<unknown> {
  if (!/^application\/json\b/i.test(c.req.header("content-type") ?? ""))
    throw new ProblemError(415, "Unsupported Media Type", "send the pool as application/json", [
      { field: "header.content-type", message: "must be application/json" },
    ]);
  try {
    return await c.req.json();
  } catch {
    throw new ProblemError(400, "Malformed JSON", "the body is not valid JSON", [
      { field: "(body)", message: "not valid JSON" },
    ]);
  }
}

/** A miss would submit a task: a fenced region refuses it (503), as `POST /v1/tasks` does. */
function refuseMissWhenFenced(deps: GatewayDeps): void {
  if (!deps.fence || deps.fence.allows()) return;
  throw new ProblemError(503, "Region Fenced", `region ${deps.config.REGION} does not hold its lease`, undefined, {
    "retry-after": "1",
  });
}

/** A pool's settings and figures (spend: solved x TASK_PRICES; ledger: what the provider charged for its tasks). */
async function poolView(deps: GatewayDeps, store: PoolStore, p: Pool) {
  const [counts, ledgerMicros] = await Promise.all([store.counts(p), store.ledgerMicros(p)]);
  const f = poolFigures(counts, deps.config.TASK_PRICES?.[p.type]);
  return {
    name: p.name,
    type: p.type,
    params: p.params,
    priority: p.priority,
    size: p.size,
    maxAgeSeconds: p.maxAgeMs / 1000,
    createdAt: p.createdAt.toISOString(),
    updatedAt: p.updatedAt.toISOString(),
    solved: f.solved,
    handedOut: f.handedOut,
    wasted: f.wasted,
    inProgress: f.inProgress,
    ready: f.ready,
    failed: f.failed,
    misses: f.misses,
    hitRate: f.hitRate,
    spendMicros: f.spendMicros,
    spend: money(f.spendMicros),
    costPerHandedOutMicros: f.costPerHandedOutMicros,
    costPerHandedOut: money(f.costPerHandedOutMicros),
    ledgerSpendMicros: ledgerMicros,
    spendSource: "estimate: solved × TASK_PRICES; ledgerSpendMicros: the provider's charges less refunds",
  };
}
