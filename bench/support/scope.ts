/**
 * What one benchmark started (servers, processes, databases), stopped last-first when it ends,
 * also when it failed half-way. A stop that hangs is given up after its timeout.
 */
export class Scope {
  private readonly stops: Array<{ what: string; stop: () => Promise<unknown> }> = [];

  constructor(private readonly log: (m: string) => void = () => {}) {}

  /** Registers how to stop something just started. */
  defer(what: string, stop: () => Promise<unknown>): void {
    this.stops.push({ what, stop });
  }

  /** Stops everything registered, last first; never throws. */
  async close(timeoutMs = 40_000): Promise<void> {
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
