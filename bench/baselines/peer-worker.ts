// The fair peer's worker (issue 13): a BullMQ worker (concurrency 200) whose job marks the row
// `solving`, submits the task to the provider (`in.php`), polls `res.php` (the first poll at
// once, then every POLL_INTERVAL_MS, as our bench's solver is configured) and marks the row
// `completed` with the token. Three autocommit statements per task (insert is the gateway's).
//   REDIS_PORT=... DATABASE_URL=... PROVIDER_URL=... PROVIDER_KEY=... CONCURRENCY=200 bun bench/baselines/peer-worker.ts
import { Worker } from "bullmq";
import postgres from "postgres";
import type { BaselineTask } from "./task-row.ts";

const sql = postgres(process.env.DATABASE_URL!, { max: Number(process.env.DB_POOL_MAX ?? 20), onnotice: () => {} });
const provider = (process.env.PROVIDER_URL ?? "").replace(/\/+$/, "");
const key = process.env.PROVIDER_KEY ?? "";
const pollEveryMs = Number(process.env.POLL_INTERVAL_MS ?? 10);
const maxPolls = Number(process.env.MAX_POLLS ?? 3000);

interface Reply {
  status: number;
  request: string;
  useragent?: string;
}

async function call(path: "in.php" | "res.php", fields: Record<string, string>): Promise<Reply> {
  const res = await fetch(`${provider}/${path}`, {
    method: "POST",
    body: new URLSearchParams({ ...fields, key, json: "1" }),
    headers: { "content-type": "application/x-www-form-urlencoded" },
    signal: AbortSignal.timeout(30_000),
  });
  return (await res.json()) as Reply;
}

function providerParams(t: BaselineTask): Record<string, string> {
  const p = t.params as Record<string, string>;
  return t.type === "turnstile"
    ? { method: "turnstile", sitekey: p.sitekey!, pageurl: p.pageurl! }
    : { method: "userrecaptcha", googlekey: p.sitekey!, pageurl: p.pageurl! };
}

async function solve(t: BaselineTask): Promise<void> {
  await sql`update tasks set state = 'solving', attempts = attempts + 1, version = version + 1, started_at = now(), updated_at = now()
            where id = ${t.id} and state in ('queued', 'solving')`;
  const sub = await call("in.php", providerParams(t));
  if (sub.status !== 1) throw new Error(`in.php: ${sub.request}`);
  for (let polls = 0; polls < maxPolls; polls++) {
    if (polls > 0) await Bun.sleep(pollEveryMs);
    const r = await call("res.php", { action: "get", id: sub.request });
    if (r.status === 1) {
      await sql`update tasks set state = 'completed', version = version + 1, token = ${r.request}, user_agent = ${r.useragent ?? null},
                provider_id = ${sub.request}, provider_polls = ${polls + 1}, completed_at = now(), updated_at = now()
                where id = ${t.id} and state = 'solving'`;
      return;
    }
    if (r.request !== "CAPCHA_NOT_READY") throw new Error(`res.php: ${r.request}`);
  }
  throw new Error("poll budget spent");
}

const worker = new Worker<BaselineTask>(process.env.QUEUE ?? "tasks", async (job) => solve(job.data), {
  connection: { host: "127.0.0.1", port: Number(process.env.REDIS_PORT), maxRetriesPerRequest: null },
  concurrency: Number(process.env.CONCURRENCY ?? 200),
});
worker.on("failed", (job, err) => console.error(`job ${job?.id} failed: ${err.message}`));
await worker.waitUntilReady();
console.log("worker started");
process.on("SIGTERM", async () => {
  await worker.close();
  await sql.end({ timeout: 5 });
  process.exit(0);
});
