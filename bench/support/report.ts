import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** One measured figure, next to the baseline measured in the same run. */
export interface Figure {
  bench: string;
  figure: string;
  ours: number;
  unit: string;
  baseline?: { label: string; value: number };
  /** ours / baseline (each figure says which way is better in its name or target). */
  ratio?: number;
  /** e.g. ">= 0.6x" or "<= 150 MB"; `met` says whether this run meets it. */
  target?: string;
  met?: boolean;
  note?: string;
}

export interface BenchError {
  bench: string;
  message: string;
}

export function fmt(v: number, unit: string): string {
  if (!Number.isFinite(v)) return "n/a";
  const digits = Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : 2;
  const n = v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: 0 });
  return unit ? `${n} ${unit}` : n;
}

const ratioText = (r: number | undefined) => (r === undefined || !Number.isFinite(r) ? "" : `${r.toFixed(2)}x`);

/** The figures as an aligned text table (notes as numbered footnotes under it). */
export function renderTable(figures: Figure[]): string {
  const notes: string[] = [];
  const rows = figures.map((f) => {
    let note = "";
    if (f.note) {
      notes.push(f.note);
      note = `[${notes.length}]`;
    }
    return [
      f.bench,
      f.figure,
      fmt(f.ours, f.unit),
      f.baseline ? `${f.baseline.label}: ${fmt(f.baseline.value, f.unit)}` : "-",
      ratioText(f.ratio),
      f.target ? `${f.target} ${f.met === undefined ? "" : f.met ? "met" : "MISSED"}`.trim() : "",
      note,
    ];
  });
  const head = ["bench", "figure", "ours", "baseline (same run)", "ratio", "target", ""];
  const widths = head.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, c) => (c === 2 || c === 4 ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!)))
      .join("  ")
      .trimEnd();
  const out = [
    line(head),
    widths
      .map((w) => "-".repeat(w))
      .join("  ")
      .trimEnd(),
    ...rows.map(line),
  ];
  notes.forEach((n, i) => out.push(`[${i + 1}] ${n}`));
  return out.join("\n");
}

/** Writes the run to `<dir>/<timestamp>.json` and returns the path. */
export function writeResults(dir: string, run: Record<string, unknown>): string {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
  writeFileSync(file, `${JSON.stringify(run, null, 2)}\n`);
  return file;
}
