// The alert rules behave as docs/runbook.md says: `promtool test rules` over alerts.test.yml
// (series in, alerts out), e.g. EventsHeadroomLow and EventsLostAfterSnapshot (Sizing EVENTS).
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { prometheusTools } from "../monitoring/prometheus-tools.ts";

test("promtool test rules: the alerts fire on the series they are meant for, and only on those", () => {
  // Debian's promtool unpacked into .data/tools/debian (nothing installed on the system).
  const { promtool } = prometheusTools((m) => console.error(`[alerts] ${m}`));
  const r = spawnSync(promtool, ["test", "rules", join(import.meta.dir, "alerts.test.yml")], { encoding: "utf8" });
  if (r.status !== 0) console.error(`${r.stdout}${r.stderr}`);
  expect(r.status).toBe(0);
}, 120_000);
