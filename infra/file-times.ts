// How long each test file took, from `bun test`'s stderr as it streams by: bun prints a file's
// name (`path.test.ts:`) before its results, so a file runs from its header to the next one (or
// the end). The slowest are printed after the run, so the suite's 30-minute budget is watched
// from CI's own output rather than guessed.

const FILE_HEADER = /^\S.*\.test\.tsx?:$/;

export interface FileTimes {
  /** Feeds a chunk of bun's stderr (chunks may split lines); `now` in ms. */
  push(chunk: string, now?: number): void;
  /** The run ended: its last file ends now (a report printed later, after another run, does not stretch it). */
  close(now?: number): void;
  /** The files by time taken, slowest first; the one still running ends at `now`. */
  slowest(n: number, now?: number): { file: string; ms: number }[];
}

export function fileTimes(): FileTimes {
  let partial = "";
  const spans: { file: string; start: number; end?: number }[] = [];
  return {
    push(chunk, now = Date.now()) {
      const lines = (partial + chunk).split("\n");
      partial = lines.pop() ?? "";
      for (const l of lines) {
        if (!FILE_HEADER.test(l)) continue;
        const last = spans.at(-1);
        if (last && last.end === undefined) last.end = now;
        spans.push({ file: l.slice(0, -1), start: now });
      }
    },
    close(now = Date.now()) {
      const last = spans.at(-1);
      if (last && last.end === undefined) last.end = now;
    },
    slowest(n, now = Date.now()) {
      return spans
        .map((s) => ({ file: s.file, ms: (s.end ?? now) - s.start }))
        .sort((a, b) => b.ms - a.ms)
        .slice(0, n);
    },
  };
}

/** The report's lines: `[test] slowest files (of the whole run's N s):` then one per file. */
export function fileTimesReport(t: FileTimes, totalMs: number, n = 15, now = Date.now()): string[] {
  return [
    `[test] slowest test files (the run took ${Math.round(totalMs / 1000)} s):`,
    ...t.slowest(n, now).map((s) => `[test]   ${(s.ms / 1000).toFixed(1).padStart(7)} s  ${s.file}`),
  ];
}
