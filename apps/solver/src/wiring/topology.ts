// The solver's task consumers: the region's streams (verified, never created: they are the
// administering side's, @pipeline/shared/provision), this version's lane consumers on the shards the
// region's assignment gives it (@pipeline/shared/shards: all of them for the first version of a region;
// none, an idle filter, for a new version until the rollout moves shards to it), and their
// recreation when a consumer vanished or TASKS was recreated (queue loss: `recovery
// rebuild-queue` recreates TASKS; the solver waits for it, then makes its consumers again).
import {
  type Consumer,
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
} from "@nats-io/jetstream";
import { type FairShare, fairShareView, type GroupOf, pollFairShare } from "@pipeline/shared/fair-share";
import { bindBucket } from "@pipeline/shared/kv";
import type { Logger } from "@pipeline/shared/log";
import { type NatsConnection, requireStreams, TOPOLOGY_WAIT_MS } from "@pipeline/shared/nats";
import type { Priority } from "@pipeline/shared/schemas";
import { ensureVersionConsumers } from "@pipeline/shared/shards";
import { buckets, LANES, laneConsumer, streams } from "@pipeline/shared/subjects";
import type { SolverConfig } from "../config.ts";
import type { GroupSource, GroupSources } from "../worker/worker.ts";

export interface TaskTopology {
  jsm: JetStreamManager;
  js: JetStreamClient;
  consumers: Record<Priority, Consumer>;
  /** The fair-share groups' consumers (docs/fair-share.md), and their weights now. */
  groups: GroupSources & {
    weightOf(group: string | undefined): number;
    /** A client's group in the record in use: the reaper queues its tasks again on it. */
    groupOf: GroupOf;
    stop(): void;
  };
  /** Called by the worker when a lane consumer is missing; several calls share one recreation. */
  recreate(lane: Priority, what: string): Promise<void>;
}

export async function openTaskTopology(
  nc: NatsConnection,
  config: SolverConfig,
  workerId: string,
  log: Logger,
): Promise<TaskTopology> {
  const jsm = await jetstreamManager(nc);
  const waiting = {
    waitMs: TOPOLOGY_WAIT_MS,
    onWait: (missing: string[]) =>
      log.warn({ missing }, "waiting for the region's NATS topology (created by the recovery service)"),
  };
  const ensure = () =>
    requireStreams(
      jsm,
      [streams.tasks(config.REGION), streams.events(config.REGION), streams.dlq(config.REGION)],
      waiting,
    );
  await ensure();
  const rolloutKv = await bindBucket(nc, buckets.rollout(config.REGION), waiting);
  const versionConsumers = () =>
    ensureVersionConsumers(jsm, rolloutKv, {
      region: config.REGION,
      version: config.SOLVER_VERSION,
      ackWaitMs: config.ACK_WAIT_MS,
      by: `solver ${workerId}`,
    });
  await versionConsumers();
  const js = jetstream(nc);
  const consumers = {} as Record<Priority, Consumer>;
  for (const lane of LANES)
    consumers[lane] = await js.consumers.get(
      streams.tasks(config.REGION),
      laneConsumer(config.REGION, lane, config.SOLVER_VERSION),
    );
  // Queue loss: once TASKS is back (`rebuild-queue` recreates it, then re-publishes the unfinished
  // tasks whose messages were lost) the consumers are recreated here so that tasks flow again at
  // once. Several solvers notice at once; creating what another has just created is a no-op on
  // the current server, so each simply ensures its consumers.
  let recreating: Promise<void> | undefined;
  const recreate = (lane: Priority, what: string) =>
    (recreating ??= (async () => {
      log.error(
        { lane, what },
        "task consumer missing: recreating this version's consumers once TASKS exists (`recovery rebuild-queue` recreates TASKS and re-publishes lost messages)",
      );
      for (let i = 0; ; i++) {
        try {
          await ensure();
          await versionConsumers();
          log.warn({ lane }, "TASKS topology recreated");
          return;
        } catch (err) {
          if (i % 10 === 0) log.warn({ err: (err as Error).message }, "recreating the TASKS topology failed; retrying");
          await Bun.sleep(500 + Math.random() * 1000);
        }
      }
    })().finally(() => (recreating = undefined)));
  const groups = await watchGroups({ jsm, js, config, log, reconcile: versionConsumers });
  return { jsm, js, consumers, groups, recreate };
}

/**
 * The region's fair-share record, read every 5 s: a group added gets this version's consumers
 * (the reconcile makes them) and a pull loop (`onAdded`); a group removed keeps its loop until the
 * process ends (its tasks already queued are still served). Weights are read at each use.
 */
async function watchGroups(o: {
  jsm: JetStreamManager;
  js: JetStreamClient;
  config: SolverConfig;
  log: Logger;
  reconcile: () => Promise<unknown>;
}): Promise<TaskTopology["groups"]> {
  const { config, log } = o;
  const sources: GroupSource[] = [];
  const added: Array<(s: GroupSource) => void> = [];
  let view = fairShareView(null);
  const open = async (record: FairShare | null) => {
    view = fairShareView(record);
    const fresh = view.groups().filter((g) => !sources.some((s) => s.group === g));
    if (fresh.length === 0) return;
    await o.reconcile();
    for (const group of fresh)
      for (const lane of LANES) {
        const consumer = await o.js.consumers.get(
          streams.tasks(config.REGION),
          laneConsumer(config.REGION, lane, config.SOLVER_VERSION, group),
        );
        const s = { lane, group, consumer };
        sources.push(s);
        for (const cb of added) cb(s);
      }
    log.info({ groups: view.groups() }, "fair-share groups in use");
  };
  const poll = pollFairShare({
    jsm: o.jsm,
    region: config.REGION,
    onRejected: (error) => log.error({ error }, "fair-share record refused; the previous one stays in use"),
    // Every read: a group whose consumers could not be made yet is tried again.
    onTick: (record) =>
      open(record).catch((err: Error) =>
        log.warn({ err: err.message }, "fair-share groups' consumers not ready; retrying at the next read"),
      ),
    onError: (err) => log.warn({ err: err.message }, "fair-share record unreadable"),
  });
  await poll.refresh();
  await open(poll.current());
  return {
    current: () => [...sources],
    onAdded: (cb) => void added.push(cb),
    weightOf: (g) => view.weightOf(g),
    groupOf: (c) => view.groupOf(c),
    stop: () => poll.stop(),
  };
}
