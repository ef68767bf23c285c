// The fair peer's gateway (issue 13): what a competent team would build instead of ours. A Hono
// app served by Bun.serve that checks the Bearer key, validates the body with zod, INSERTs the
// row (`queued`, one autocommit statement: a durable commit), `queue.add`s the task to BullMQ
// (jobId = task id; Redis with AOF everysec) and answers 202. Run as its own process:
//   PORT=... API_KEYS=k1,k2 REDIS_PORT=... DATABASE_URL=... QUEUE=... bun bench/baselines/peer-gateway.ts
import { Queue } from "bullmq";
import { Hono } from "hono";
import postgres from "postgres";
import { z } from "zod";
import type { BaselineTask } from "./task-row.ts";

const keys = new Set((process.env.API_KEYS ?? "").split(",").filter(Boolean));
const sql = postgres(process.env.DATABASE_URL!, { max: Number(process.env.DB_POOL_MAX ?? 10), onnotice: () => {} });
const queue = new Queue<BaselineTask>(process.env.QUEUE ?? "tasks", {
  connection: { host: "127.0.0.1", port: Number(process.env.REDIS_PORT) },
});

const url = z.string().url().max(2048);
const Body = z.discriminatedUnion("type", [
  z.object({
    type: z.literal("turnstile"),
    params: z.object({
      sitekey: z.string().min(1).max(200),
      pageurl: url,
      action: z.string().max(200).optional(),
      cdata: z.string().max(2000).optional(),
    }),
  }),
  z.object({
    type: z.literal("recaptcha_v2"),
    params: z.object({ sitekey: z.string().min(1).max(200), pageurl: url, invisible: z.boolean().optional() }),
  }),
]);

const app = new Hono();
app.post("/v1/tasks", async (c) => {
  const auth = c.req.header("authorization") ?? "";
  const key = auth.startsWith("Bearer ") ? auth.slice(7) : "";
  if (!keys.has(key)) return c.json({ error: "unauthorized" }, 401);
  let raw: unknown;
  try {
    raw = await c.req.json();
  } catch {
    return c.json({ error: "invalid JSON" }, 400);
  }
  const parsed = Body.safeParse(raw);
  if (!parsed.success) return c.json({ error: "invalid task", issues: parsed.error.issues.slice(0, 5) }, 400);
  const t: BaselineTask = { id: Bun.randomUUIDv7(), type: parsed.data.type, params: parsed.data.params };
  await sql`insert into tasks (id, owner, request_hash, region, type, priority, params, state)
            values (${t.id}, 'bench', 'peer', 'peer', ${t.type}, 'normal', ${sql.json(t.params as postgres.JSONValue)}, 'queued')`;
  await queue.add("solve", t, { jobId: t.id, removeOnComplete: true, removeOnFail: 1000 });
  return c.json({ id: t.id, status: "queued" }, 202);
});

await queue.waitUntilReady();
const server = Bun.serve({ hostname: "127.0.0.1", port: Number(process.env.PORT ?? 0), fetch: app.fetch });
console.log(`listening on ${server.port}`);
process.on("SIGTERM", async () => {
  await server.stop(false);
  await queue.close();
  await sql.end({ timeout: 5 });
  process.exit(0);
});
