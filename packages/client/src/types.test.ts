import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createClient } from "./client.ts";
import { ClientOptionError } from "./options.ts";
import { parseAccepted, parseProblem, parseTaskView, ReplyShapeError } from "./types.ts";

const view = {
  id: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a01",
  type: "turnstile",
  priority: "normal",
  status: "completed",
  attempts: 1,
  createdAt: "2026-12-06T12:00:00.000Z",
  updatedAt: "2026-12-06T12:00:01.000Z",
  completedAt: "2026-12-06T12:00:01.000Z",
  result: { token: "tok", expiresAt: "2026-12-06T12:02:01.000Z", userAgent: "UA" },
};

const fieldOf = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    if (err instanceof ReplyShapeError) return err.field;
    throw err;
  }
  return undefined;
};

test("a task view parses as given; each wrong field is named", () => {
  expect(parseTaskView(view)).toEqual(view as never);
  expect(fieldOf(() => parseTaskView({ ...view, id: "x" }))).toBe("id");
  expect(fieldOf(() => parseTaskView({ ...view, status: "done" }))).toBe("status");
  expect(fieldOf(() => parseTaskView({ ...view, attempts: 1.5 }))).toBe("attempts");
  expect(fieldOf(() => parseTaskView({ ...view, completedAt: "never" }))).toBe("completedAt");
  expect(fieldOf(() => parseTaskView({ ...view, result: { expiresAt: null } }))).toBe("result.token");
  expect(fieldOf(() => parseTaskView({ ...view, error: { message: "m" } }))).toBe("error.code");
  expect(fieldOf(() => parseTaskView([]))).toBe("(body)");
  expect(fieldOf(() => parseTaskView({ ...view, type: 3 }, "data."))).toBe("data.type");
});

test("accepted replies and problems", () => {
  expect(parseAccepted({ id: view.id, status: "queued" }, true)).toEqual({
    id: view.id,
    status: "queued",
    replayed: true,
  });
  expect(fieldOf(() => parseAccepted({ id: view.id }, false))).toBe("status");
  expect(
    parseProblem({
      type: "t",
      title: "Invalid Task",
      status: 400,
      errors: [{ field: "params.sitekey", message: "m" }],
    }),
  ).toEqual({ type: "t", title: "Invalid Task", status: 400, errors: [{ field: "params.sitekey", message: "m" }] });
  expect(parseProblem("<html>")).toBeUndefined();
});

test("the package stands alone: its code imports only itself and node: built-ins", () => {
  const dir = import.meta.dir;
  for (const f of readdirSync(dir).filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts"))) {
    const specs = [...readFileSync(join(dir, f), "utf8").matchAll(/from\s+"([^"]+)"/g)].map((m) => m[1]!);
    for (const s of specs) expect(s.startsWith("./") || s.startsWith("node:") ? "ok" : `${f} imports ${s}`).toBe("ok");
  }
  const pkg = JSON.parse(readFileSync(join(dir, "..", "package.json"), "utf8"));
  expect(pkg.dependencies).toBeUndefined();
});

test("createClient names the option at fault", () => {
  const fieldOfOptions = (o: object) => {
    try {
      createClient({ regions: ["http://a:1"], apiKey: "k", ...o });
    } catch (err) {
      if (err instanceof ClientOptionError) return err.field;
      throw err;
    }
    return undefined;
  };
  expect(fieldOfOptions({})).toBeUndefined();
  expect(fieldOfOptions({ regions: [] })).toBe("regions");
  expect(fieldOfOptions({ regions: ["http://a:1", "a:2"] })).toBe("regions[1]");
  expect(fieldOfOptions({ apiKey: "" })).toBe("apiKey");
  expect(fieldOfOptions({ retry: { attempts: 0 } })).toBe("retry.attempts");
  expect(fieldOfOptions({ retry: { attempts: 1.5 } })).toBe("retry.attempts");
  expect(fieldOfOptions({ timeoutMs: Number.NaN })).toBe("timeoutMs");
  expect(fieldOfOptions({ regionNames: { hel1: "http://b:2" } })).toBe("regionNames.hel1");
  expect(fieldOfOptions({ regionNames: { fsn1: "http://a:1/" } })).toBeUndefined();
});
