// The pure parts of the console: per-minute series over the last 15 minutes, and their inline
// SVG charts (rendered on the server, no chart library in the page). Tested in charts.test.ts.

export interface Bucket {
  /** Start of the minute, epoch ms. */
  t: number;
  /** Tasks that reached `completed` in that minute. */
  n: number;
  /** Solve time (accepted -> completed) percentiles in ms, null when no task finished. */
  p50: number | null;
  p95: number | null;
}

/** Fills the minutes with nothing in them: exactly `minutes` buckets, oldest first, the last one being `now`'s. */
export function fillBuckets(
  rows: Array<{ minute: number; n: number; p50: number | null; p95: number | null }>,
  now: number,
  minutes = 15,
): Bucket[] {
  const last = Math.floor(now / 60_000);
  const byMinute = new Map(rows.map((r) => [r.minute, r]));
  const out: Bucket[] = [];
  for (let m = last - minutes + 1; m <= last; m++) {
    const r = byMinute.get(m);
    out.push({ t: m * 60_000, n: r?.n ?? 0, p50: r?.p50 ?? null, p95: r?.p95 ?? null });
  }
  return out;
}

/** Escapes text for HTML content and attribute values. */
export function esc(v: unknown): string {
  return String(v ?? "").replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!,
  );
}

/** A duration in ms for people: 850 ms, 4.2 s, 3 min 5 s. */
export function fmtMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3600_000) return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
  return `${Math.floor(ms / 3600_000)} h ${Math.round((ms % 3600_000) / 60_000)} min`;
}

const W = 480;
const H = 140;
const PAD = { l: 52, r: 8, t: 10, b: 22 };

/** Axis labels: short (the full durations are in the text above the charts). */
const axisMs = (v: number) => (v < 1000 ? `${Math.round(v)} ms` : `${+(v / 1000).toFixed(1)} s`);

/** A "nice" upper bound for an axis: 1, 2 or 5 times a power of ten, at least max. */
export function niceMax(max: number): number {
  if (!(max > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  for (const m of [1, 2, 5, 10]) if (m * p >= max) return m * p;
  return 10 * p;
}

const hhmm = (t: number) => new Date(t).toISOString().slice(11, 16);

function frame(
  title: string,
  ymax: number,
  fmtY: (v: number) => string,
  buckets: Bucket[],
  body: string,
  legend = "",
): string {
  const ih = H - PAD.t - PAD.b;
  const grid = [0, 0.5, 1]
    .map((f) => {
      const y = PAD.t + ih - f * ih;
      return `<line x1="${PAD.l}" x2="${W - PAD.r}" y1="${y}" y2="${y}" class="grid"/><text x="${PAD.l - 4}" y="${y + 4}" text-anchor="end">${esc(fmtY(f * ymax))}</text>`;
    })
    .join("");
  const first = buckets[0]?.t ?? 0;
  const last = buckets.at(-1)?.t ?? 0;
  const xl = `<text x="${PAD.l}" y="${H - 6}">${hhmm(first)}</text><text x="${W - PAD.r}" y="${H - 6}" text-anchor="end">${hhmm(last)} UTC</text>`;
  return `<svg viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(title)}" class="chart"><title>${esc(title)}</title>${grid}${body}${xl}${legend}</svg>`;
}

/** Tasks completed per minute, as bars. */
export function throughputChart(buckets: Bucket[]): string {
  const ymax = niceMax(Math.max(0, ...buckets.map((b) => b.n)));
  const iw = W - PAD.l - PAD.r;
  const ih = H - PAD.t - PAD.b;
  const bw = iw / Math.max(1, buckets.length);
  const bars = buckets
    .map((b, i) => {
      const h = (b.n / ymax) * ih;
      return `<rect x="${(PAD.l + i * bw + 1).toFixed(1)}" y="${(PAD.t + ih - h).toFixed(1)}" width="${Math.max(1, bw - 2).toFixed(1)}" height="${h.toFixed(1)}" class="bar"><title>${hhmm(b.t)}: ${b.n}</title></rect>`;
    })
    .join("");
  return frame("tasks completed per minute, last 15 minutes", ymax, (v) => String(Math.round(v)), buckets, bars);
}

/** p50 and p95 solve time per minute, as two lines (gaps where nothing finished). */
export function latencyChart(buckets: Bucket[]): string {
  const ymax = niceMax(Math.max(0, ...buckets.flatMap((b) => [b.p50 ?? 0, b.p95 ?? 0])));
  const iw = W - PAD.l - PAD.r;
  const ih = H - PAD.t - PAD.b;
  const step = iw / Math.max(1, buckets.length - 1);
  const line = (pick: (b: Bucket) => number | null, cls: string) => {
    const segs: string[] = [];
    let cur: string[] = [];
    buckets.forEach((b, i) => {
      const v = pick(b);
      if (v === null) {
        if (cur.length) segs.push(cur.join(" "));
        cur = [];
        return;
      }
      cur.push(`${(PAD.l + i * step).toFixed(1)},${(PAD.t + ih - (v / ymax) * ih).toFixed(1)}`);
    });
    if (cur.length) segs.push(cur.join(" "));
    return segs
      .map((p) =>
        p.includes(" ")
          ? `<polyline points="${p}" class="${cls}"/>`
          : `<circle cx="${p.split(",")[0]}" cy="${p.split(",")[1]}" r="2" class="${cls}"/>`,
      )
      .join("");
  };
  const legend = `<text x="${W - PAD.r}" y="${PAD.t + 10}" text-anchor="end"><tspan class="p50t">p50</tspan> <tspan class="p95t">p95</tspan></text>`;
  return frame(
    "p50 and p95 solve time per minute, last 15 minutes",
    ymax,
    axisMs,
    buckets,
    line((b) => b.p50, "p50") + line((b) => b.p95, "p95"),
    legend,
  );
}
