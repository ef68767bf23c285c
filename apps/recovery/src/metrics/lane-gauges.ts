// `recovery_lane_paused{region,lane}`: 1 while the lane's record holds it paused, else 0 (read at
// scrape time from the lane records and consumers, apps/recovery/src/lanes), and
// `recovery_lane_paused_seconds{region,lane}`: how long it has been (absent while it runs). The
// alert LanePausedLong (infra/prometheus/alerts.yml) fires on a pause nobody ended.
import { Gauge, type Registry } from "@pipeline/shared/metrics";
import type { LaneState } from "../lanes/model.ts";

export function laneGauges(registry: Registry, region: string, read: () => Promise<LaneState[]>): void {
  let pending: Promise<LaneState[]> | undefined;
  const reading = () =>
    (pending ??= read()
      .catch(() => [])
      .finally(() => setTimeout(() => (pending = undefined), 0)));
  new Gauge({
    name: "recovery_lane_paused",
    help: "1 while the lane is paused by an operator (recovery lanes, the console's Lanes panel), 0 while it runs",
    labelNames: ["region", "lane"],
    registers: [registry],
    async collect() {
      this.reset();
      for (const l of await reading()) if (!l.error) this.set({ region, lane: l.lane }, l.state === "paused" ? 1 : 0);
    },
  });
  new Gauge({
    name: "recovery_lane_paused_seconds",
    help: "Seconds since the lane was paused (absent while it runs)",
    labelNames: ["region", "lane"],
    registers: [registry],
    async collect() {
      this.reset();
      for (const l of await reading())
        if (l.state === "paused" && l.record)
          this.set({ region, lane: l.lane }, Math.max(0, (Date.now() - Date.parse(l.record.at)) / 1000));
    },
  });
}
