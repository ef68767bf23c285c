// Prometheus' text exposition format (version 0.0.4): one HELP and TYPE line per family, then its samples.

export type MetricType = "gauge" | "counter";

export interface Sample {
  name: string;
  help: string;
  type: MetricType;
  value: number;
  labels?: Record<string, string>;
}

export const EXPOSITION_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

function escapeLabelValue(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Number.POSITIVE_INFINITY) return "+Inf";
  if (v === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(v);
}

/**
 * Renders samples as Prometheus text: families in the order first seen, each with one HELP and
 * TYPE line, label values escaped. Throws on a metric or label name Prometheus would refuse.
 */
export function renderExposition(samples: Sample[]): string {
  const families = new Map<string, Sample[]>();
  for (const s of samples) {
    if (!NAME.test(s.name)) throw new Error(`invalid metric name ${JSON.stringify(s.name)}`);
    const family = families.get(s.name);
    if (family) family.push(s);
    else families.set(s.name, [s]);
  }
  const lines: string[] = [];
  for (const [name, family] of families) {
    const first = family[0]!;
    lines.push(
      `# HELP ${name} ${first.help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")}`,
      `# TYPE ${name} ${first.type}`,
    );
    for (const s of family) {
      const labels = Object.entries(s.labels ?? {});
      for (const [k] of labels)
        if (!LABEL.test(k)) throw new Error(`invalid label name ${JSON.stringify(k)} on ${name}`);
      const text = labels.length ? `{${labels.map(([k, v]) => `${k}="${escapeLabelValue(v)}"`).join(",")}}` : "";
      lines.push(`${name}${text} ${formatValue(s.value)}`);
    }
  }
  return `${lines.join("\n")}\n`;
}
