// A JetStream cluster of nats-servers on 127.0.0.1 (a region as production runs it), each node
// started by `startNatsServer`, with routes between all of them and one set of users.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connectNats } from "@pipeline/shared/nats";
import { freePort } from "./free-port.ts";
import { type NatsServerHandle, startNatsServer } from "./nats-server.ts";
import { eventually } from "./testing/index.ts";

/** The cluster's nodes, and one handle over all of them (its `url` lists every node, as NATS_URL does in production). */
export interface NatsCluster {
  /** Node `i` is the server named `<name>-<i + 1>`. */
  nodes: NatsServerHandle[];
  handle: NatsServerHandle;
}

async function startNodes(name: string, root: string, regions: string[], n: number): Promise<NatsServerHandle[]> {
  const ports = [];
  for (let i = 0; i < n; i++) ports.push({ client: await freePort(), route: await freePort() });
  const nodes: NatsServerHandle[] = [];
  for (const [i, p] of ports.entries()) {
    const storeDir = join(root, `n${i}`);
    mkdirSync(storeDir, { recursive: true });
    nodes.push(
      await startNatsServer({
        port: p.client,
        storeDir,
        name: `${name}-${i + 1}`,
        regions,
        ...(nodes[0] ? { credentialsFrom: nodes[0].credentialsFile } : {}),
        cluster: {
          name,
          port: p.route,
          routes: ports.filter((_, j) => j !== i).map((o) => ({ host: "127.0.0.1", port: o.route })),
        },
      }),
    );
  }
  return nodes;
}

/** Resolves once a stream with a copy on each of the `n` nodes can be made (a meta leader and every peer known). */
async function clusterReady(handle: NatsServerHandle, name: string, n: number): Promise<void> {
  const nc = await connectNats(handle.url, `${name}-ready`, handle.auth("admin"));
  try {
    await eventually(
      async () => {
        const jsm = await jetstreamManager(nc);
        const probe = { name: "CLUSTER_READY", subjects: ["cluster-ready"], num_replicas: n };
        await jsm.streams.add(probe);
        return jsm.streams.delete(probe.name);
      },
      30_000,
      250,
    );
  } finally {
    await nc.close();
  }
}

/**
 * `n` nodes (named `<name>-1` … `<name>-<n>`) of one JetStream cluster on 127.0.0.1, routes between
 * all, sharing their users, each user allowed the streams and buckets of `regions`; resolves once it
 * can make an R`n` stream. The handle's `stop` stops every node and removes their stores.
 */
export async function startNatsCluster(name: string, regions: string[], n = 3): Promise<NatsCluster> {
  const root = mkdtempSync(join(tmpdir(), `nats-${name}-cluster-`));
  const nodes = await startNodes(name, root, regions, n);
  const first = nodes[0]!;
  const each = async (f: (h: NatsServerHandle) => Promise<void>) => {
    for (const h of nodes) await f(h);
  };
  const handle: NatsServerHandle = {
    ...first,
    url: nodes.map((h) => h.url).join(","),
    pid: () => undefined,
    stop: async () => {
      await each((h) => h.stop());
      rmSync(root, { recursive: true, force: true });
    },
    kill: () => each((h) => h.kill()),
    start: () => each((h) => h.start()),
  };
  await clusterReady(handle, name, n);
  return { nodes, handle };
}
