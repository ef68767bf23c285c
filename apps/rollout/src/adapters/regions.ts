// The rollout's reach into one region: its NATS (the shard assignment, the lane consumers, the
// solvers' heartbeats, EVENTS) and its database (the gate's task rows). One link per region, each
// over its own connections: the gate needs each region's rows anyway, and a region the rollout
// cannot reach simply holds its step (the record says why) instead of being judged blind.
import { type JetStreamClient, type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { auditLog, type Database, openDatabase } from "@pipeline/shared/db";
import { Heartbeat, openWorkersBucket } from "@pipeline/shared/kv";
import { connectNats, type NatsConnection, publishWithRetry } from "@pipeline/shared/nats";
import { openRolloutBucket, readAssignment, type ShardAssignment } from "@pipeline/shared/shards";
import { eventSubject } from "@pipeline/shared/subjects";
import type { RegionEndpoint } from "../config.ts";
import type { Beat, WindowRow } from "../domain/figures.ts";

export interface RegionLink {
  name: string;
  nc: NatsConnection;
  jsm: JetStreamManager;
  js: JetStreamClient;
  /** `rollout_<region>`: the shard assignment. */
  shards: KV;
  workers: KV;
  db?: Database | undefined;
  assignment(): Promise<ShardAssignment | undefined>;
  /** The live heartbeats, and the workers whose entry was deleted (a clean stop) since they were last seen. */
  heartbeats(known: Iterable<string>): Promise<{ beats: Beat[]; deleted: Set<string> }>;
  /** This region's tasks accepted since `sinceMs` (the gate's window). */
  windowRows(sinceMs: number): Promise<WindowRow[]>;
  /** A rollout event on this region's EVENTS (`events.<region>.rollout`). */
  publish(event: Record<string, unknown>, msgId: string): Promise<void>;
  close(): Promise<void>;
}

export async function openRegionLink(e: RegionEndpoint, clientName: string): Promise<RegionLink> {
  const nc = await connectNats(e.natsUrl, `${clientName}-${e.name}`, e.auth);
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  const shards = await openRolloutBucket(nc, e.name);
  const workers = await openWorkersBucket(nc, e.name);
  const db = e.databaseUrl ? openDatabase(e.databaseUrl, { max: 2, appName: "rollout" }) : undefined;
  return {
    name: e.name,
    nc,
    jsm,
    js,
    shards,
    workers,
    db,
    async assignment() {
      return (await readAssignment(shards))?.assignment;
    },
    async heartbeats(known) {
      const beats: Beat[] = [];
      const live = new Set<string>();
      for await (const k of await workers.keys()) {
        const en = await workers.get(k);
        if (!en || en.operation !== "PUT") continue;
        const h = Heartbeat.safeParse(en.json());
        if (!h.success) continue;
        beats.push(h.data);
        live.add(k);
      }
      const deleted = new Set<string>();
      for (const k of known) {
        if (live.has(k)) continue;
        const en = await workers.get(k).catch(() => null);
        if (en?.operation === "DEL") deleted.add(k);
      }
      return { beats, deleted };
    },
    async windowRows(sinceMs) {
      if (!db) throw new Error(`no database for region ${e.name}`);
      return db.sql<WindowRow[]>`
        select t.id, t.state, t.attempts, t.error_code as "errorCode", t.provider_submissions as "providerSubmissions", (extract(epoch from t.created_at) * 1000)::float8 as "createdAtMs", (extract(epoch from t.completed_at) * 1000)::float8 as "completedAtMs", t.type, r.accepted
        from tasks t left join task_reports r on r.task_id = t.id
        where t.region = ${e.name} and t.created_at >= ${new Date(sinceMs).toISOString()}::timestamptz`;
    },
    async publish(event, msgId) {
      await publishWithRetry(
        js,
        eventSubject(e.name, "rollout"),
        JSON.stringify({ kind: "rollout", region: e.name, at: new Date().toISOString(), data: event }),
        msgId,
        5000,
      );
    },
    async close() {
      await db?.close().catch(() => {});
      await nc.close().catch(() => {});
    },
  };
}

/** An entry in the home region's audit log. */
export async function audit(
  db: Database | undefined,
  actor: string,
  action: string,
  detail: Record<string, unknown>,
): Promise<void> {
  if (db) await db.db.insert(auditLog).values({ actor, action, detail });
}

/** The CLI's audit log: the home region's database over one connection, or nowhere without a URL. */
export function openAuditLog(
  databaseUrl: string | undefined,
  actor: string,
): { write(action: string, detail: Record<string, unknown>): Promise<void>; close(): Promise<void> } {
  const db = databaseUrl ? openDatabase(databaseUrl, { max: 1, appName: "rollout-cli" }) : undefined;
  return {
    write: (action, detail) => audit(db, actor, action, detail),
    async close() {
      await db?.close();
    },
  };
}
