// Reconciling the ledger with the provider: over a window, what the ledger booked (charges less
// refunds) against how much the provider's balance fell between the samples at the window's ends.
// Pure: the figures are read in figures.ts.
import { formatMicros } from "@pipeline/shared/provider";

/** One balance sample (micro-dollars, unix ms). */
export interface Sample {
  balanceMicros: number;
  at: number;
}

/** What is known of one account over the window. */
export interface ReconcileInput {
  provider: string;
  /** The samples at the window's ends: the last at or before its start (else its first), and its last. */
  first: Sample | null;
  last: Sample | null;
  /** The ledger's net between the two samples' times (charges less refunds), micro-dollars. */
  ledgerNetMicros: number;
}

export interface Reconciliation {
  provider: string;
  from: string | null;
  to: string | null;
  ledgerNetMicros: number;
  /** How much the balance fell between the two samples (negative: it rose, e.g. a top-up). */
  balanceDeltaMicros: number | null;
  /** balance decrease less the ledger's net: > 0 the provider took more than we booked. */
  differenceMicros: number | null;
  /** Within the tolerance (null: not comparable, fewer than two samples). */
  agrees: boolean | null;
}

/**
 * Compares the ledger's net with the balance decrease between two samples. Top-ups are not known
 * to the pipeline: one in the window shows as a negative difference of its amount. With fewer
 * than two distinct samples nothing is compared (`agrees` null).
 */
export function reconcile(i: ReconcileInput, toleranceMicros: number): Reconciliation {
  const iso = (s: Sample | null) => (s ? new Date(s.at).toISOString() : null);
  const base = { provider: i.provider, from: iso(i.first), to: iso(i.last), ledgerNetMicros: i.ledgerNetMicros };
  if (!i.first || !i.last || i.first.at >= i.last.at)
    return { ...base, balanceDeltaMicros: null, differenceMicros: null, agrees: null };
  const delta = i.first.balanceMicros - i.last.balanceMicros;
  const difference = delta - i.ledgerNetMicros;
  return {
    ...base,
    balanceDeltaMicros: delta,
    differenceMicros: difference,
    agrees: Math.abs(difference) <= toleranceMicros,
  };
}

const usd = (m: number | null) => (m === null ? "?" : m < 0 ? `-$${formatMicros(-m)}` : `$${formatMicros(m)}`);

/** The report for people: one line per account, and what a difference may mean. */
export function renderReconciliations(rs: Reconciliation[], hours: number, toleranceMicros: number): string {
  const lines = [`reconcile: the last ${hours} h, tolerance ${usd(toleranceMicros)}`, ""];
  if (rs.length === 0) lines.push("  no provider account has a balance sample or a ledger entry in the window");
  for (const r of rs) {
    const mark = r.agrees === null ? "?   " : r.agrees ? "ok  " : "DIFF";
    lines.push(
      `  ${mark}  ${r.provider}  ledger net ${usd(r.ledgerNetMicros)}  balance delta ${usd(r.balanceDeltaMicros)}  difference ${usd(r.differenceMicros)}${r.from ? `  (${r.from} .. ${r.to})` : ""}`,
    );
    if (r.agrees === null) lines.push("        fewer than two balance samples in the window: nothing to compare");
  }
  if (rs.some((r) => r.agrees === false))
    lines.push(
      "",
      "  A difference is the provider's balance change the ledger does not explain: a top-up (the pipeline",
      "  cannot know them) shows as a negative difference of its amount; charges of tasks solved by another",
      "  region's solvers, or outside the pipeline with the same key, as a positive one.",
    );
  return lines.join("\n");
}
