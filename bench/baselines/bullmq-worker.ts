// Baseline (b): a BullMQ worker on Redis whose job does the same Postgres INSERT + UPDATE.
//   REDIS_PORT=... DATABASE_URL=... QUEUE=... CONCURRENCY=200 bun bench/baselines/bullmq-worker.ts
import { Worker } from "bullmq";
import postgres from "postgres";
import { type BaselineTask, recordTask } from "./task-row.ts";

const sql = postgres(process.env.DATABASE_URL!, { max: Number(process.env.DB_POOL_MAX ?? 20), onnotice: () => {} });
const worker = new Worker<BaselineTask>(process.env.QUEUE ?? "tasks", async (job) => recordTask(sql, job.data), {
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
