// Ingest ceiling: the least a durable submit endpoint can do here. A Hono handler that reads the
// JSON body, publishes {id, type, priority} to the TASKS stream with Nats-Msg-Id = id, awaits the
// PubAck and answers 202. No validation, no auth, no Postgres. Run as its own process:
//   NATS_URL=... PORT=... REGION=... bun bench/baselines/publish-only-server.ts
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connectNats, ensureStreams } from "@pipeline/shared/nats";
import { shardOf, taskSubject } from "@pipeline/shared/subjects";
import { Hono } from "hono";

const region = process.env.REGION ?? "ceiling";
const nc = await connectNats(process.env.NATS_URL ?? "nats://127.0.0.1:4222", "bench-publish-only", {
  user: process.env.NATS_USER,
  pass: process.env.NATS_PASSWORD,
});
await ensureStreams(await jetstreamManager(nc), { region });
const js = jetstream(nc);

const app = new Hono();
app.post("/v1/tasks", async (c) => {
  const body = (await c.req.json()) as { type?: string };
  const id = Bun.randomUUIDv7();
  await js.publish(
    taskSubject(region, "normal", shardOf(id)),
    JSON.stringify({ id, type: body.type, priority: "normal" }),
    { msgID: id },
  );
  return c.json({ id, status: "queued" }, 202);
});

const server = Bun.serve({ hostname: "127.0.0.1", port: Number(process.env.PORT ?? 0), fetch: app.fetch });
console.log(`listening on ${server.port}`);
process.on("SIGTERM", async () => {
  await server.stop(false);
  await nc.drain().catch(() => {});
  process.exit(0);
});
