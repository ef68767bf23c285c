// Debian's Prometheus and Alertmanager (bookworm: 2.42 and 0.25), unpacked into the project's
// .data/tools/debian by @pipeline/devstack (nothing installed on the system): for checking
// rendered configs and for the alert delivery test. The monitoring host runs the same packages.
import { join } from "node:path";
import { debianPackages } from "@pipeline/devstack";

export interface PrometheusTools {
  prometheus: string;
  promtool: string;
  alertmanager: string;
  amtool: string;
}

/** The four binaries (fetched on first use). */
export function prometheusTools(log?: (m: string) => void): PrometheusTools {
  const bin = join(debianPackages("prometheus", ["prometheus", "prometheus-alertmanager"], log).root, "usr", "bin");
  return {
    prometheus: join(bin, "prometheus"),
    promtool: join(bin, "promtool"),
    alertmanager: join(bin, "prometheus-alertmanager"),
    amtool: join(bin, "amtool"),
  };
}
