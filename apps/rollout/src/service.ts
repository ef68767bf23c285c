// The rollout service: one connection per region, the record store in the home region, the
// controller ticking every ROLLOUT_TICK_MS, and an operator-side listener with the JSON status
// (GET /v1/rollout) and the metrics (GET /metrics).
import type { Logger } from "@pipeline/shared/log";
import { startStatusListener } from "./adapters/http.ts";
import { createRolloutMetrics } from "./adapters/metrics.ts";
import { rolloutNotifier } from "./adapters/notify.ts";
import { openRegionLink, type RegionLink } from "./adapters/regions.ts";
import { createRolloutStore, openControlBucket } from "./adapters/store.ts";
import { type RolloutConfig, regionEndpoints } from "./config.ts";
import { createController } from "./controller.ts";

/** Opens every region, starts the tick loop and the listener; `stop()` ends the loop after its tick, then closes both. */
export async function startRollout(config: RolloutConfig, env: Record<string, string | undefined>, log: Logger) {
  const endpoints = regionEndpoints(config, env, { needDatabase: true });
  const regions = new Map<string, RegionLink>();
  for (const e of endpoints) regions.set(e.name, await openRegionLink(e, "rollout-service"));
  const home = regions.get(config.REGION)!;
  const store = createRolloutStore(await openControlBucket(home.nc, config.REGION));
  let metrics: ReturnType<typeof createRolloutMetrics> | undefined;
  // NOTIFY_WEBHOOK_URL: rollbacks and rollouts waiting for a person reach the operators' channel.
  const notify = await rolloutNotifier(config, home.nc, log);
  const controller = createController({
    ...(notify ? { notify } : {}),
    store,
    regions,
    home,
    ackWaitMs: config.ACK_WAIT_MS,
    now: Date.now,
    log,
    onVerdict: (r, v) => metrics?.verdict(r, v),
  });
  metrics = createRolloutMetrics(controller.status);

  let stopped = false;
  let failing = false;
  const loop = (async () => {
    while (!stopped) {
      try {
        await controller.tick();
        if (failing) log.info("rollout tick ok again");
        failing = false;
      } catch (err) {
        // A region out of reach, a write refused: the record is unchanged, the next tick retries.
        if (!failing) log.warn({ err: (err as Error).message }, "rollout tick failed; retrying");
        failing = true;
      }
      await Bun.sleep(config.ROLLOUT_TICK_MS);
    }
  })();

  const server =
    config.ROLLOUT_HTTP_PORT === undefined
      ? undefined
      : startStatusListener({
          hostname: config.ROLLOUT_HTTP_HOST,
          port: config.ROLLOUT_HTTP_PORT,
          status: controller.status,
          metrics: metrics.response,
        });
  log.info(
    { regions: [...regions.keys()], http: server ? `${server.hostname}:${server.port}` : null },
    "rollout service started",
  );
  return {
    port: server?.port,
    controller,
    async stop() {
      stopped = true;
      await loop;
      server?.stop();
      for (const l of regions.values()) await l.close();
    },
  };
}
