import { expect, test } from "bun:test";
import { failureDigest } from "./failure-digest.ts";

// What bun 1.4 prints on stderr for a run with one failed test (its closing list included).
const RUN = `bun test v1.4.5 (a7733435c)

tests/a.test.ts:
(pass) ok one [0.14ms]
3 | test("bad one", () => { expect({ a: [1] }).toEqual({ a: [] }); });
                                               ^
error: expect(received).toEqual(expected)

- Expected  - 1
+ Received  + 3

      at <anonymous> (/repo/tests/a.test.ts:3:47)
(fail) bad one [2.77ms]

tests/b.test.ts:
(pass) fine [1.00ms]

1 tests failed:
(fail) bad one [2.77ms]

 2 pass
 1 fail
`;

test("a failed test's error, code frame and stack are repeated once, under its file and name", () => {
  const d = failureDigest();
  // Chunks that split lines anywhere, as a pipe delivers them.
  for (let i = 0; i < RUN.length; i += 7) d.push(RUN.slice(i, i + 7));
  const out = d.report();
  expect(out[0]).toBe("[test] why the failed test failed (again here, for CI's tail):");
  expect(out[1]).toBe("[test] ── tests/a.test.ts: bad one [2.77ms]");
  expect(out).toContain("[test]    error: expect(received).toEqual(expected)");
  expect(out).toContain("[test]          at <anonymous> (/repo/tests/a.test.ts:3:47)");
  expect(out.some((l) => l.includes("ok one") || l.includes("fine") || l.includes("pass"))).toBe(false);
  expect(out.filter((l) => l.includes("── ")).length).toBe(1);
});

test("no failure, no digest; a long why keeps its last lines, or from the error on; past the cap the rest are counted", () => {
  const ok = failureDigest();
  ok.push("x.test.ts:\n(pass) a [1ms]\n");
  expect(ok.report()).toEqual([]);

  const d = failureDigest({ perFailure: 3, maxFailures: 1 });
  d.push(["x.test.ts:", "l1", "l2", "l3", "l4", "l5", "(fail) first [1ms]", "why 2", "(fail) second [1ms]"].join("\n"));
  expect(d.report()).toEqual([
    "[test] why the failed tests failed (again here, for CI's tail):",
    "[test] ── x.test.ts: first [1ms]",
    "[test]    l3",
    "[test]    l4",
    "[test]    l5",
    "[test] ... and 1 more failed tests (see above)",
  ]);

  const e = failureDigest({ perFailure: 3 });
  e.push(
    ["x.test.ts:", "log", "1 | frame", "    ^", "error: boom", "- a", "+ b", "+ c", "(fail) t [1ms]", ""].join("\n"),
  );
  expect(e.report().slice(2)).toEqual(["[test]    error: boom", "[test]    - a", "[test]    + b"]);
});
