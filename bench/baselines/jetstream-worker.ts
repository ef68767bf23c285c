// Baseline (a): the least a JetStream -> Postgres worker does. One durable pull consumer; it
// fetches only into free slots (pulls of up to 64), and per message: INSERT + UPDATE, then ack.
//   NATS_URL=... DATABASE_URL=... REGION=... CONCURRENCY=200 bun bench/baselines/jetstream-worker.ts
import { type JsMsg, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connectNats, ensureConsumer, ensureStreams, laneConsumerConfig } from "@pipeline/shared/nats";
import { streams } from "@pipeline/shared/subjects";
import postgres from "postgres";
import { type BaselineTask, recordTask } from "./task-row.ts";

const region = process.env.REGION ?? "baseline";
const concurrency = Number(process.env.CONCURRENCY ?? 200);
const sql = postgres(process.env.DATABASE_URL!, { max: Number(process.env.DB_POOL_MAX ?? 20), onnotice: () => {} });
const nc = await connectNats(process.env.NATS_URL ?? "nats://127.0.0.1:4222", "bench-jetstream-worker", {
  user: process.env.NATS_USER,
  pass: process.env.NATS_PASSWORD,
});
const jsm = await jetstreamManager(nc);
await ensureStreams(jsm, { region });
const cfg = laneConsumerConfig({ region, lane: "normal", version: "baseline", ackWaitMs: 30_000 });
await ensureConsumer(jsm, streams.tasks(region), cfg);
const consumer = await jetstream(nc).consumers.get(streams.tasks(region), cfg.durable_name);

let running = true;
let inFlight = 0;
let wake: (() => void) | undefined;
async function handle(msg: JsMsg): Promise<void> {
  try {
    await recordTask(sql, msg.json<BaselineTask>());
    msg.ack();
  } catch (err) {
    console.error(`task failed: ${(err as Error).message}`);
    msg.nak(500);
  } finally {
    inFlight--;
    wake?.();
  }
}
console.log("worker started");
process.on("SIGTERM", async () => {
  running = false;
  wake?.();
  await nc.drain().catch(() => {});
  await sql.end({ timeout: 5 });
  process.exit(0);
});
while (running) {
  const free = concurrency - inFlight;
  if (free <= 0) {
    await new Promise<void>((r) => (wake = r));
    continue;
  }
  const want = Math.min(free, 64);
  inFlight += want;
  let got = 0;
  try {
    for await (const msg of await consumer.fetch({ max_messages: want, expires: 1000 })) {
      got++;
      void handle(msg);
    }
  } catch (err) {
    if (running) console.error(`fetch failed: ${(err as Error).message}`);
  } finally {
    inFlight -= want - got;
  }
}
