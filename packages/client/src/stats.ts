/** What the client saw, for the caller to read (`client.stats()`): the client-observed errors of a drill. */
export interface ClientStats {
  /** HTTP requests sent (each try, each region, probes excluded). */
  requests: number;
  /** Tries after the first one of a call. */
  retries: number;
  /** Moves of the active region away from the one that failed. */
  failovers: number;
  /** Returns to the home region after a successful probe. */
  failbacks: number;
  /** Requests sent on to a task's home region after a 409 `x-home-region`. */
  redirects: number;
  /** Failed tries by kind: `connection`, `timeout`, `shape` (a reply not as promised), or the HTTP status (`"429"`, `"503"`…). */
  errors: Record<string, number>;
}

export function emptyStats(): ClientStats {
  return { requests: 0, retries: 0, failovers: 0, failbacks: 0, redirects: 0, errors: {} };
}

export function countError(s: ClientStats, kind: string): void {
  s.errors[kind] = (s.errors[kind] ?? 0) + 1;
}

export function copyStats(s: ClientStats): ClientStats {
  return { ...s, errors: { ...s.errors } };
}
