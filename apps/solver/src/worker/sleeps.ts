/**
 * Many sleeps on one timer: the pauses of thousands of waiting tasks (first-poll delay, poll
 * interval, slot retries) share one `setTimeout` armed for the earliest of them, and one abort
 * listener per signal, instead of a timer, a closure and an abort listener each. `after` wakes a
 * record's method instead of settling a promise: a waiting task's pause then holds its Sleep and
 * nothing else (no promise, resolvers or continuations).
 */

/** What `after` wakes: `wake()` when due, `abort(reason)` when the signal aborts first. */
export interface Wakeable {
  wake(): void;
  abort(reason: unknown): void;
}

interface Sleep {
  due: number;
  target: Wakeable;
  /** Settled (woken, or rejected by an abort): skipped when it comes up in the heap. */
  settled: boolean;
  /** The sleeps of its signal, to forget it on waking. */
  peers: Set<Sleep>;
}

export interface Sleeper {
  /** Sleeps `ms`, or rejects with the signal's reason when it aborts first (a hard stop). */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
  /**
   * Calls `target.wake()` in `ms`, or `target.abort(reason)` when the signal aborts first (never
   * both, never synchronously). A throw from `wake` goes to `abort`.
   */
  after(ms: number, signal: AbortSignal, target: Wakeable): void;
  /** Sleeps pending now (tests, metrics). */
  pending(): number;
}

/** One per worker: its sleeps share one timer. */
export function createSleeper(): Sleeper {
  /** A binary min-heap on `due`. */
  const heap: Sleep[] = [];
  const bySignal = new WeakMap<AbortSignal, Set<Sleep>>();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let timerDue = Infinity;

  function push(s: Sleep): void {
    heap.push(s);
    for (let i = heap.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1;
      if (heap[parent]!.due <= heap[i]!.due) break;
      [heap[parent], heap[i]] = [heap[i]!, heap[parent]!];
      i = parent;
    }
  }

  function pop(): Sleep | undefined {
    const top = heap[0];
    const last = heap.pop();
    if (heap.length > 0 && last) {
      heap[0] = last;
      for (let i = 0; ; ) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && heap[l]!.due < heap[m]!.due) m = l;
        if (r < heap.length && heap[r]!.due < heap[m]!.due) m = r;
        if (m === i) break;
        [heap[m], heap[i]] = [heap[i]!, heap[m]!];
        i = m;
      }
    }
    return top;
  }

  function arm(): void {
    while (heap.length > 0 && heap[0]!.settled) pop();
    const next = heap[0];
    if (!next) {
      if (timer) clearTimeout(timer);
      timer = undefined;
      timerDue = Infinity;
      return;
    }
    if (timer && timerDue <= next.due) return;
    if (timer) clearTimeout(timer);
    timerDue = next.due;
    timer = setTimeout(fire, Math.max(0, next.due - performance.now()));
  }

  function fire(): void {
    timer = undefined;
    timerDue = Infinity;
    const now = performance.now();
    while (heap.length > 0 && heap[0]!.due <= now + 1) {
      const s = pop()!;
      if (s.settled) continue;
      s.settled = true;
      s.peers.delete(s);
      try {
        s.target.wake();
      } catch (err) {
        s.target.abort(err);
      }
    }
    arm();
  }

  function peersOf(signal: AbortSignal): Set<Sleep> {
    let peers = bySignal.get(signal);
    if (!peers) {
      const set = new Set<Sleep>();
      bySignal.set(signal, (peers = set));
      signal.addEventListener(
        "abort",
        () => {
          for (const s of set) {
            s.settled = true;
            s.target.abort(signal.reason);
          }
          set.clear();
          arm();
        },
        { once: true },
      );
    }
    return peers;
  }

  function after(ms: number, signal: AbortSignal, target: Wakeable): void {
    if (signal.aborted) {
      queueMicrotask(() => target.abort(signal.reason));
      return;
    }
    const peers = peersOf(signal);
    const s: Sleep = { due: performance.now() + Math.max(0, ms), target, settled: false, peers };
    peers.add(s);
    push(s);
    arm();
  }

  /** Sleeps `ms`, or rejects with the signal's reason when it aborts first (a hard stop). */
  function sleep(ms: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    const { promise, resolve, reject } = Promise.withResolvers<void>();
    after(ms, signal, { wake: resolve, abort: reject });
    return promise;
  }

  function pending(): number {
    return heap.filter((s) => !s.settled).length;
  }
  return { sleep, after, pending };
}
