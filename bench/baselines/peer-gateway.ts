// The fair peer's gateway (issue 13): what a competent team would build instead of ours. A Hono
// app served by Bun.serve that checks the Bearer key, validates the body with zod, INSERTs the
// row (`queued`, one autocommit statement: a durable commit), `queue.add`s the task to BullMQ
// (jobId = task id; Redis with AOF everysec) and answers 202. `GET /v1/tasks/:id?wait=<s>` (same
// key) answers the row (`status` = its state, the token once completed); when the row is not final
// it first waits, the way BullMQ's users are told to: `job.waitUntilFinished(queueEvents, ms)` on
// one QueueEvents for the process, made at the first such wait (so a run that only POSTs, like
// end-to-end and ingest, has no events reader). Run as its own process:
//   PORT=... API_KEYS=k1,k2 REDIS_PORT=... DATABASE_URL=... QUEUE=... bun bench/baselines/peer-gateway.ts
import { Queue, QueueEvents } from "bullmq";
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

/** The longest `?wait` honoured, seconds (ours: MAX_WAIT_SECONDS, default 60). */
const MAX_WAIT_SECONDS = 60;
const FINAL = new Set(["completed", "failed", "cancelled", "expired"]);
const Id = z.string().uuid();
let queueEvents: QueueEvents | undefined;
/** The process's one QueueEvents (a blocking XREAD on the queue's event stream), made at the first wait. */
const events = () =>
  (queueEvents ??= new QueueEvents(process.env.QUEUE ?? "tasks", {
    connection: { host: "127.0.0.1", port: Number(process.env.REDIS_PORT) },
  }));

interface TaskRow {
  id: string;
  type: string;
  priority: string;
  state: string;
  attempts: number;
  token: string | null;
  user_agent: string | null;
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
}

const readRow = async (id: string): Promise<TaskRow | undefined> => {
  const rows = await sql<TaskRow[]>`
    select id::text, type, priority, state, attempts, token, user_agent, created_at, updated_at, completed_at
    from tasks where id = ${id}`;
  return rows[0];
};

const view = (r: TaskRow) => ({
  id: r.id,
  type: r.type,
  priority: r.priority,
  status: r.state,
  attempts: r.attempts,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
  completedAt: r.completed_at?.toISOString() ?? null,
  ...(r.state === "completed" && r.token !== null
    ? { result: { token: r.token, expiresAt: null, ...(r.user_agent ? { userAgent: r.user_agent } : {}) } }
    : {}),
});

app.get("/v1/tasks/:id", async (c) => {
  const auth = c.req.header("authorization") ?? "";
  if (!keys.has(auth.startsWith("Bearer ") ? auth.slice(7) : "")) return c.json({ error: "unauthorized" }, 401);
  const id = c.req.param("id");
  if (!Id.safeParse(id).success) return c.json({ error: "not found" }, 404);
  const waitS = Math.min(MAX_WAIT_SECONDS, Math.max(0, Number(c.req.query("wait") ?? 0) || 0));
  let row = await readRow(id);
  if (!row) return c.json({ error: "not found" }, 404);
  if (waitS > 0 && !FINAL.has(row.state)) {
    // No job: it completed and was removed (removeOnComplete) since the read. waitUntilFinished
    // rejects on a timeout, a failed job or a job removed meanwhile; the row says which.
    const job = await queue.getJob(id);
    if (job) await job.waitUntilFinished(events(), waitS * 1000).catch(() => {});
    row = (await readRow(id)) ?? row;
  }
  return c.json(view(row));
});

await queue.waitUntilReady();
const server = Bun.serve({ hostname: "127.0.0.1", port: Number(process.env.PORT ?? 0), fetch: app.fetch });
console.log(`listening on ${server.port}`);
process.on("SIGTERM", async () => {
  await server.stop(false);
  await queueEvents?.close();
  await queue.close();
  await sql.end({ timeout: 5 });
  process.exit(0);
});
