/** What the emulator saw since the last reset; JSON-serialisable. */
export interface EmulatorStats {
  /** Accepted in.php calls. */
  submissions: number;
  /** in.php calls not accepted (validation, key, fault, limit, HTML error pages). */
  rejectedSubmissions: number;
  /** res.php get/get2 calls; a bulk get counts as one. */
  polls: number;
  /** All res.php calls, whatever the action or outcome. */
  resCalls: number;
  /** Accepted submissions per task fingerprint (see fingerprintOf). */
  byFingerprint: Record<string, number>;
  /**
   * When each of those submissions was accepted (epoch ms, oldest first; as many as byFingerprint
   * counts): a drill tells a payment made just before a fault from one made long before it.
   */
  paidAtByFingerprint: Record<string, number[]>;
  /** get/get2 calls per provider id (each id of a bulk get counts once). */
  pollsByProviderId: Record<string, number>;
  /** Tasks holding a thread slot right now, per API key. */
  inFlightByKey: Record<string, number>;
  /** Highest in-flight count seen per key (measured at each accepted submission). */
  maxInFlightByKey: Record<string, number>;
  /** Fingerprints submitted (and accepted) more than once. */
  duplicateFingerprints: number;
  /** reportbad / reportgood calls that were recorded. */
  reports: { bad: number; good: number };
  /** When each key (valid or not) last called in.php or res.php (epoch ms): "was the old key used again?". */
  lastCallAtByKey: Record<string, number>;
}

/** Counters behind EmulatorStats; one per emulator. */
export class StatsRecorder {
  private submissions = 0;
  private rejectedSubmissions = 0;
  private polls = 0;
  private resCalls = 0;
  private byFingerprint: Record<string, number> = {};
  private paidAtByFingerprint: Record<string, number[]> = {};
  private pollsByProviderId: Record<string, number> = {};
  private maxInFlightByKey: Record<string, number> = {};
  private duplicateFingerprints = 0;
  private reports = { bad: 0, good: 0 };
  private lastCallAtByKey: Record<string, number> = {};

  /** Notes a call made with `key` (any endpoint, any outcome). */
  called(key: string | undefined, at: number): void {
    if (key) this.lastCallAtByKey[key] = at;
  }

  /** Counts an accepted submission (made at `at`, epoch ms) and the key's in-flight count after it. */
  accepted(fingerprint: string, key: string, inFlightNow: number, at: number): void {
    this.submissions += 1;
    const n = (this.byFingerprint[fingerprint] ?? 0) + 1;
    this.byFingerprint[fingerprint] = n;
    (this.paidAtByFingerprint[fingerprint] ??= []).push(at);
    if (n === 2) this.duplicateFingerprints += 1;
    this.maxInFlightByKey[key] = Math.max(this.maxInFlightByKey[key] ?? 0, inFlightNow);
  }

  /** Counts an in.php call that was not accepted. */
  rejected(): void {
    this.rejectedSubmissions += 1;
  }

  /** Counts a res.php call. */
  resCall(): void {
    this.resCalls += 1;
  }

  /** Counts one get/get2 call for the given ids. */
  poll(ids: string[]): void {
    this.polls += 1;
    for (const id of ids) this.pollsByProviderId[id] = (this.pollsByProviderId[id] ?? 0) + 1;
  }

  /** Counts a recorded report. */
  report(kind: "bad" | "good"): void {
    this.reports[kind] += 1;
  }

  /** Zeroes every counter; max in-flight restarts from what is in flight now. */
  reset(inFlightNow: Record<string, number>): void {
    this.submissions = 0;
    this.rejectedSubmissions = 0;
    this.polls = 0;
    this.resCalls = 0;
    this.byFingerprint = {};
    this.paidAtByFingerprint = {};
    this.pollsByProviderId = {};
    this.maxInFlightByKey = Object.fromEntries(Object.entries(inFlightNow).filter(([, n]) => n > 0));
    this.duplicateFingerprints = 0;
    this.reports = { bad: 0, good: 0 };
    this.lastCallAtByKey = {};
  }

  /** A deep copy of the counters with the current in-flight counts. */
  snapshot(inFlightByKey: Record<string, number>): EmulatorStats {
    return {
      submissions: this.submissions,
      rejectedSubmissions: this.rejectedSubmissions,
      polls: this.polls,
      resCalls: this.resCalls,
      byFingerprint: { ...this.byFingerprint },
      paidAtByFingerprint: Object.fromEntries(Object.entries(this.paidAtByFingerprint).map(([f, t]) => [f, [...t]])),
      pollsByProviderId: { ...this.pollsByProviderId },
      inFlightByKey: { ...inFlightByKey },
      maxInFlightByKey: { ...this.maxInFlightByKey },
      duplicateFingerprints: this.duplicateFingerprints,
      reports: { ...this.reports },
      lastCallAtByKey: { ...this.lastCallAtByKey },
    };
  }
}
