import { expect, test } from "bun:test";
import { Writable } from "node:stream";
import { createLogger } from "./log.ts";

test("keys, tokens and answers never reach a log line", () => {
  const lines: string[] = [];
  const sink = new Writable({ write: (c, _e, cb) => (lines.push(String(c)), cb()) });
  const log = createLogger("t", { destination: sink as never, level: "info" });
  log.info(
    {
      key: "sk-secret-1",
      token: "03AGdBq-secret",
      result: { token: "tok-secret" },
      req: { headers: { authorization: "Bearer sk-2" } },
      provider: { apiKey: "p-secret" },
    },
    "hello",
  );
  const out = lines.join("");
  for (const s of ["sk-secret-1", "03AGdBq-secret", "tok-secret", "sk-2", "p-secret"]) expect(out).not.toContain(s);
  expect(out).toContain("[redacted]");
  expect(JSON.parse(out).msg).toBe("hello");
});
