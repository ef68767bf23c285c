import { UNITS_PER_DOLLAR } from "./money.ts";

/** One key's money as the provider booked it, since the last reset. */
export interface KeyBooks {
  /** Solved tasks charged, and their sum in units (0.00001 USD). */
  charges: number;
  chargedUnits: number;
  /** Refunds granted for `reportbad`, and their sum in units. */
  refunds: number;
  refundedUnits: number;
  /** The same sums in micro-dollars (1 USD = 1,000,000), the pipeline's ledger unit. */
  chargedMicros: number;
  refundedMicros: number;
}

/** The provider's books: what it charged and refunded, per key (JSON-serialisable). */
export interface EmulatorBooks {
  byKey: Record<string, KeyBooks>;
  totals: KeyBooks;
}

const MICROS_PER_UNIT = 1_000_000 / UNITS_PER_DOLLAR;

const empty = (): KeyBooks => ({
  charges: 0,
  chargedUnits: 0,
  refunds: 0,
  refundedUnits: 0,
  chargedMicros: 0,
  refundedMicros: 0,
});

/** Charges and refunds per key, in integer units; one per emulator. */
export class BooksRecorder {
  private byKey = new Map<string, KeyBooks>();

  private of(key: string): KeyBooks {
    let b = this.byKey.get(key);
    if (!b) this.byKey.set(key, (b = empty()));
    return b;
  }

  /** Books a charge of `units` to `key`. */
  charge(key: string, units: number): void {
    const b = this.of(key);
    b.charges += 1;
    b.chargedUnits += units;
    b.chargedMicros = b.chargedUnits * MICROS_PER_UNIT;
  }

  /** Books a refund of `units` to `key`. */
  refund(key: string, units: number): void {
    const b = this.of(key);
    b.refunds += 1;
    b.refundedUnits += units;
    b.refundedMicros = b.refundedUnits * MICROS_PER_UNIT;
  }

  /** Forgets every entry. */
  reset(): void {
    this.byKey = new Map();
  }

  /** A copy of the books with the totals over every key. */
  snapshot(): EmulatorBooks {
    const totals = empty();
    const byKey: Record<string, KeyBooks> = {};
    for (const [key, b] of this.byKey) {
      byKey[key] = { ...b };
      totals.charges += b.charges;
      totals.chargedUnits += b.chargedUnits;
      totals.refunds += b.refunds;
      totals.refundedUnits += b.refundedUnits;
    }
    totals.chargedMicros = totals.chargedUnits * MICROS_PER_UNIT;
    totals.refundedMicros = totals.refundedUnits * MICROS_PER_UNIT;
    return { byKey, totals };
  }
}
