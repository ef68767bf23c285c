// Long-polls (`?wait=`) and event streams hold a connection and a watcher each: capped per API key
// and in all, so one client cannot take every slot (a 429 with Retry-After instead).

export interface WaitLimits {
  /** A slot for `clientId`, or undefined when its cap or the global cap is reached; call the result to give it back (idempotent). */
  enter(clientId: string): (() => void) | undefined;
  /** Slots in use, of one client or in all. */
  inUse(clientId?: string): number;
}

export function createWaitLimits(o: { perKey: number; total: number }): WaitLimits {
  const byKey = new Map<string, number>();
  let total = 0;
  return {
    enter(clientId) {
      const mine = byKey.get(clientId) ?? 0;
      if (mine >= o.perKey || total >= o.total) return undefined;
      byKey.set(clientId, mine + 1);
      total++;
      let given = false;
      return () => {
        if (given) return;
        given = true;
        total--;
        const n = (byKey.get(clientId) ?? 1) - 1;
        if (n <= 0) byKey.delete(clientId);
        else byKey.set(clientId, n);
      };
    },
    inUse: (clientId) => (clientId === undefined ? total : (byKey.get(clientId) ?? 0)),
  };
}
