/**
 * Collects garbage when the process has grown, instead of when JavaScriptCore gets round to it.
 *
 * With thousands of tasks in flight, bursts (thousands of claims, submits or completions within
 * seconds) allocate far faster than JSC's full collections run: measured at 5,000 in flight, the
 * JS heap held 40 MB of live objects but grew to 160 MB of capacity with garbage, and mimalloc
 * (the native side: sockets, fetch and query buffers) kept what the bursts had used, so the
 * peak RSS was about twice what a collection every 2 s gave. `Bun.gc(true)` runs a full JSC
 * collection and returns mimalloc's free pages to the OS.
 *
 * A collection runs when the resident set has grown by `growthBytes` since the last one (checked
 * every `checkMs`), so an idle or steady process pays nothing, and a burst costs one full
 * collection (tens of ms at 10,000 tasks in flight) per `growthBytes` it allocates. Measured with
 * `bun bench/run.ts in-flight` (5,000 tasks): peak RSS 246 MB without it, 197 MB at 16 MB,
 * 177 MB at 8 MB, 167 MB at 4 MB (the default); end-to-end throughput did not move (4 vs 16 MB,
 * two runs each), though under that steady churn the collections are ~11% of the solver's CPU
 * samples (`GC_GROWTH_MB=0` turns it off where throughput matters more than the peak). Capping
 * their CPU share (5% below the highest level a collection started at, 50% above it) was tried:
 * 7.9% of the samples, and a 257 MB peak at 10,000 in flight instead of 207. What works is a
 * soft limit: below it (a solver at full throughput stays near 110-125 MB) the GC_GROWTH_MB
 * threshold, above it 1 MB. Measured at 10,000 in flight (with the waiting room): 155-159 MB
 * peak without the limit, 150-151 MB with 2 MB above it, 146-147 MB with 1 MB. Then, with
 * checks every 25 ms, a 4 MB threshold below the limit cost ~15% of the end-to-end throughput
 * (701-702 tasks/s against 787-845 with no governor); 16 MB costs ~5% (764-803) and the
 * in-flight peak is 137-140 MB instead of 134-135: 16 is the default. Above the limit the
 * collections may take at most GC_MAX_CPU_PERCENT (50) of the time, so a process that stays
 * above it under steady load does not spend its CPU collecting after every megabyte: at 25% the
 * 10,000-task peak was 150-156 MB, at 50% 139-140 MB (as without a cap).
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
    const above = o.softLimitBytes !== undefined && o.softLimitBytes > 0 && now > o.softLimitBytes;
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
