/**
 * Collects garbage when the process has grown, instead of when JavaScriptCore gets round to it.
 *
 * Why: with thousands of tasks in flight, bursts of claims, submits and completions allocate far
 * faster than JSC's full collections run (measured at 5,000 in flight: 40 MB of live objects in a
 * 160 MB heap), and mimalloc keeps the native pages the bursts used, so the peak RSS was about
 * twice what regular collections give. `Bun.gc(true)` runs a full collection and returns
 * mimalloc's free pages to the OS.
 *
 * What it does (checked every `checkMs`, 25 ms by default):
 * - below the soft limit (`GC_SOFT_LIMIT_MB`, 112): a collection once the resident set has grown
 *   by `GC_GROWTH_MB` (16) since the last one, so an idle or steady process pays nothing;
 * - above it: a collection every `GC_GROWTH_ABOVE_LIMIT_MB` (1) of growth, but collections may
 *   take at most `GC_MAX_CPU_PERCENT` (50) of the time, so a process that stays above the limit
 *   under heavy churn does not spend all its CPU collecting.
 *
 * Measured (`bun bench/run.ts in-flight`, 10,000 tasks in flight with the waiting room): peak RSS
 * 137-140 MB with these defaults; 155-159 MB with no soft limit; a 4 MB growth threshold instead of
 * 16 cost ~15% of end-to-end throughput for a few MB less; a 25% CPU cap above the limit let the
 * peak reach 150-156 MB. `GC_GROWTH_MB=0` turns the governor off.
 *
 * Since a parked task holds records instead of suspended calls (worker.ts `Run`, 2026-12-07) the
 * floor at 10,000 in flight is ~112 MB: with a soft limit of 128 the peak was 129-130 MB (the
 * 16 MB of growth allowed below it, plus the overshoot); 112 gives 115-117 MB (104: 112-113).
 * Its cost where throughput matters (`bun bench/profile.ts 3000`, 7 alternated runs each): solver
 * CPU per task median 0.483 vs 0.457 ms, total 1.466 vs 1.532 ms (within the runs' spread), the
 * solver's peak there 114-117 vs 128-131 MB.
 *
 * The soft limit applies only with `GC_SOFT_LIMIT_MIN_IN_FLIGHT` (2,000) or more tasks in flight
 * (`softLimitApplies`), since 2026-12-07: with a few hundred in flight the resident set above the
 * floor is garbage between collections, which the growth rule already bounds (peak 124-143 MB at
 * 200 in flight), and there the soft limit's collections (one every MB, 40-50 ms each under load:
 * 37-44 in a profile run against 17-23 without) cost the solver 0.09-0.10 ms of CPU per task of
 * 0.54-0.69 (`bun bench/profile.ts 3000`, PROFILE_SOLVER_ENV `{"GC_SOFT_LIMIT_MB":"0"}`, pairs
 * alternated: 0.687/0.600, 0.647/0.540, 0.617/0.520, 0.633/0.537, 0.660/0.570). With thousands
 * parked the live set is what grows, and the limit holds it as before.
 */
export interface MemoryGovernor {
  stop(): void;
  /** Collections run so far and the time they took (metrics, tests). */
  collections(): number;
  collectMs(): number;
}

export interface MemoryGovernorOptions {
  checkMs: number;
  growthBytes: number;
  /**
   * A soft limit (like Go's GOMEMLIMIT): above it the governor collects after every
   * `growthAboveLimitBytes` instead, trading CPU for a lower peak. 0: no soft limit.
   */
  softLimitBytes?: number;
  growthAboveLimitBytes?: number;
  /**
   * Above the soft limit, the most of the time collections may take (after one of T ms the next
   * waits T / share): a process that stays above it under steady load must not spend its CPU
   * collecting after every megabyte. Below the limit the (large) threshold is the only bound.
   */
  maxCpuShareAboveLimit?: number;
  /** Whether the soft limit applies now (the wiring: enough tasks in flight); default always. */
  softLimitApplies?: () => boolean;
  rss?: () => number;
  collect?: () => void;
  now?: () => number;
}

export function startMemoryGovernor(o: MemoryGovernorOptions): MemoryGovernor {
  const rss = o.rss ?? (() => process.memoryUsage.rss());
  const collect = o.collect ?? (() => Bun.gc(true));
  let runs = 0;
  let spent = 0;
  if (o.growthBytes <= 0) return { stop() {}, collections: () => runs, collectMs: () => spent };
  const clock = o.now ?? (() => performance.now());
  const share = o.maxCpuShareAboveLimit ?? 0.5;
  let floor = rss();
  /** When a collection above the soft limit may start again. */
  let notBefore = 0;
  const timer = setInterval(() => {
    const now = rss();
    // The floor follows the resident set down (memory given back without a collection of ours).
    if (now < floor) floor = now;
    const above =
      o.softLimitBytes !== undefined &&
      o.softLimitBytes > 0 &&
      now > o.softLimitBytes &&
      (o.softLimitApplies?.() ?? true);
    if (now - floor < (above ? (o.growthAboveLimitBytes ?? o.growthBytes) : o.growthBytes)) return;
    const t0 = clock();
    if (above && now - floor < o.growthBytes && t0 < notBefore) return;
    collect();
    const took = clock() - t0;
    spent += took;
    runs++;
    notBefore = t0 + took / share;
    floor = rss();
  }, o.checkMs);
  timer.unref?.();
  return {
    stop: () => clearInterval(timer),
    collections: () => runs,
    collectMs: () => spent,
  };
}
