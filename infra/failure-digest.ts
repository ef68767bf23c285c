// Why each test failed, gathered from `bun test`'s stderr as it streams by, to print again just
// above CI's summary line: CI shows only the start and the end of a run's output, and a long run's
// failure messages sit in the middle. For a `(fail)` line it keeps what bun printed since the
// previous result line (a test's own logs, the code frame, the error, the stack): `perFailure`
// lines of it, from the error line on.

const RESULT = /^\((pass|fail|skip|todo)\) /;
const FILE_HEADER = /^\S.*\.test\.tsx?:$/;

/** From the first error line on (the code frame above it left out: the stack names the line); without one, the last lines. */
function why(lines: string[], n: number): string[] {
  const at = lines.findIndex((l) => /^(error|\w*Error)\b.*:/.test(l.trim()));
  return at < 0 ? lines.slice(-n) : lines.slice(at, at + n);
}

export interface FailureDigest {
  /** Feeds a chunk of bun's stderr (chunks may split lines). */
  push(chunk: string): void;
  /** The digest's lines: nothing when no test failed. */
  report(): string[];
}

export function failureDigest(o: { perFailure?: number; maxFailures?: number } = {}): FailureDigest {
  const perFailure = o.perFailure ?? 20;
  const maxFailures = o.maxFailures ?? 10;
  let partial = "";
  let file = "";
  let since: string[] = [];
  const failures: { file: string; name: string; lines: string[] }[] = [];
  const seen = new Set<string>();
  let more = 0;

  const line = (l: string) => {
    if (FILE_HEADER.test(l)) {
      file = l.slice(0, -1);
      since = [];
      return;
    }
    const m = RESULT.exec(l);
    if (!m) {
      since.push(l);
      if (since.length > 400) since = since.slice(-200); // a long test's own output: its error block is at the end
      return;
    }
    if (m[1] === "fail") {
      const name = l.slice(m[0].length);
      // bun repeats every failed test's line in its closing list: the first sighting holds the why.
      if (!seen.has(name) && since.some((s) => s.trim())) {
        seen.add(name);
        if (failures.length < maxFailures)
          failures.push({
            file,
            name,
            lines: why(
              since.filter((s) => s.trim()),
              perFailure,
            ),
          });
        else more++;
      }
    }
    since = [];
  };

  return {
    push(chunk) {
      const parts = (partial + chunk).split("\n");
      partial = parts.pop() ?? "";
      for (const p of parts) line(p.replace(/\r$/, ""));
    },
    report() {
      if (partial) {
        line(partial);
        partial = "";
      }
      if (!failures.length) return [];
      const out = [
        `[test] why ${failures.length + more === 1 ? "the failed test" : "the failed tests"} failed (again here, for CI's tail):`,
      ];
      for (const f of failures)
        out.push(`[test] ── ${f.file ? `${f.file}: ` : ""}${f.name}`, ...f.lines.map((l) => `[test]    ${l}`));
      if (more) out.push(`[test] ... and ${more} more failed tests (see above)`);
      return out;
    },
  };
}
