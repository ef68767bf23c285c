import { expect, test } from "bun:test";
import { fileTimes, fileTimesReport } from "./file-times.ts";

test("a file runs from its header to the next one; headers split across chunks still count", () => {
  const t = fileTimes();
  t.push("a.test.ts:\n(pass) one\n", 0);
  t.push("b.te", 1000);
  t.push("st.ts:\n(pass) two\n", 1500);
  t.push("c.test.ts:\n", 5500);
  expect(t.slowest(5, 6000)).toEqual([
    { file: "b.test.ts", ms: 4000 },
    { file: "a.test.ts", ms: 1500 },
    { file: "c.test.ts", ms: 500 },
  ]);
  const lines = fileTimesReport(t, 6000, 2, 6000);
  expect(lines[0]).toBe("[test] slowest test files (the run took 6 s):");
  expect(lines[1]).toContain("4.0 s  b.test.ts");
  expect(lines).toHaveLength(3);
});

test("a closed run's last file ends at the close, not at the report", () => {
  const t = fileTimes();
  t.push("a.test.ts:\n", 0);
  t.close(2000);
  expect(t.slowest(5, 900_000)).toEqual([{ file: "a.test.ts", ms: 2000 }]);
});

test("lines that only look like paths are not headers", () => {
  const t = fileTimes();
  t.push("  at tests/x.test.ts:12:3\nerror: tests/y.test.ts: boom\n", 0);
  expect(t.slowest(5, 10)).toEqual([]);
});
