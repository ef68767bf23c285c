/**
 * What one benchmark started (servers, processes, databases), stopped last-first when it ends,
 * also when it failed half-way. A stop that hangs is given up after its timeout.
 */
export class Scope {
  private readonly stops: Array<{ what: string; stop: () => Promise<unknown> }> = [];
  private closing: Promise<void> | undefined;

  constructor(private readonly log: (m: string) => void = () => {}) {}

  /** Registers how to stop something just started (at once if the scope is already closing). */
  defer(what: string, stop: () => Promise<unknown>): void {
    if (this.closing) void stop().catch((err: Error) => this.log(`stopping ${what} failed: ${err.message}`));
    else this.stops.push({ what, stop });
  }

  /**
   * A scope for one part of a benchmark, closed by its own code when the part ends, or by this
   * scope's close() if it is still open then (a failure, Ctrl-C).
   */
  child(): Scope {
    const c = new Scope(this.log);
    this.defer("sub-scope", () => c.close());
    return c;
  }

  /** Stops everything registered, last first; never throws. A second call waits for the first. */
  close(timeoutMs = 40_000): Promise<void> {
    this.closing ??= this.stopAll(timeoutMs);
    return this.closing;
  }

  private async stopAll(timeoutMs: number): Promise<void> {
    for (const { what, stop } of this.stops.splice(0).reverse()) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<"late">((r) => (timer = setTimeout(() => r("late"), timeoutMs)));
      try {
        const r = await Promise.race([stop().then(() => "ok" as const), late]);
        if (r === "late") this.log(`stopping ${what} took over ${timeoutMs} ms; left behind`);
      } catch (err) {
        this.log(`stopping ${what} failed: ${(err as Error).message}`);
      } finally {
        clearTimeout(timer);
      }
    }
  }
}
