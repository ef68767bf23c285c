// The pure parts of the bulk actions: the filter's rules, the token's binding and expiry, the lines.
import { expect, test } from "bun:test";
import { parseBulkFilter, statesOf } from "./filter.ts";
import { outcomeLine, previewLine } from "./summary.ts";
import { bulkSigner } from "./token.ts";

const NOW = Date.UTC(2026, 11, 6, 12, 0, 0);

test("a redrive's filter: state forced to failed, the region set to this one, durations fixed at the preview", () => {
  const r = parseBulkFilter("redrive", { client: "acme", from: "2h", type: "", search: "sk-1" }, "fsn1", NOW);
  expect(r).toEqual({
    ok: true,
    filter: { state: "failed", client: "acme", region: "fsn1", from: "2026-12-06T10:00:00.000Z", search: "sk-1" },
  });
  expect(statesOf("redrive", { region: "fsn1" })).toEqual(["failed"]);
});

test("a filter the action cannot take is refused, naming the field", () => {
  const refused = (action: "redrive" | "cancel", input: Record<string, unknown>) => {
    const r = parseBulkFilter(action, input, "fsn1", NOW);
    return r.ok ? [] : r.fields;
  };
  expect(refused("redrive", { state: "queued" })).toEqual(["state"]);
  expect(refused("redrive", { region: "hel1" })).toEqual(["region"]);
  expect(refused("redrive", { priority: "urgent" })).toEqual(["priority"]);
  expect(refused("redrive", { from: "yesterday" })).toEqual(["from"]);
  expect(refused("redrive", { limit: "10" })).toEqual(["limit"]);
  expect(refused("redrive", { after: "x" })).toEqual(["after"]);
  expect(refused("redrive", { colour: "red" })).toEqual(["colour"]);
  expect(refused("cancel", {})).toEqual(["client"]);
  expect(refused("cancel", { client: "acme", state: "failed" })).toEqual(["state"]);
  const r = parseBulkFilter("redrive", { region: "hel1" }, "fsn1", NOW);
  expect(!r.ok && r.error).toContain("this is region fsn1");
  // A cancel without a state walks every unfinished state; with one, that state.
  expect(statesOf("cancel", { region: "fsn1", client: "a" })).toEqual(["queued", "retrying", "solving"]);
  expect(statesOf("cancel", { region: "fsn1", client: "a", state: "queued" })).toEqual(["queued"]);
});

test("a token verifies only unchanged, for its action and region, before its expiry, with this signer's secret", () => {
  const s = bulkSigner(Buffer.alloc(32, 7), 300_000);
  const grant = {
    action: "redrive" as const,
    filter: { state: "failed" as const, region: "fsn1" },
    count: 412,
    region: "fsn1",
  };
  const { token, expiresAt } = s.sign(grant, NOW);
  expect(expiresAt).toBe("2026-12-06T12:05:00.000Z");
  const ok = s.verify(token, { action: "redrive", region: "fsn1" }, NOW + 299_999);
  expect(ok).toEqual({ ok: true, grant: { ...grant, expires: NOW + 300_000 } });
  const reason = (t: unknown, action: "redrive" | "cancel" = "redrive", region = "fsn1", at = NOW) => {
    const v = s.verify(t, { action, region }, at);
    return v.ok ? "ok" : v.reason;
  };
  expect(reason(token, "redrive", "fsn1", NOW + 300_000)).toContain("expired");
  expect(reason(token, "cancel")).toContain("not a bulk cancel");
  expect(reason(token, "redrive", "hel1")).toContain("previewed in region fsn1");
  // The count or the filter changed in the body: the signature no longer matches.
  const [body, sig] = token.split(".");
  const forged = Buffer.from(
    JSON.stringify({ ...JSON.parse(Buffer.from(body!, "base64url").toString()), count: 5 }),
  ).toString("base64url");
  expect(reason(`${forged}.${sig}`)).toContain("not issued by this console");
  // Another process's secret (a restart): refused.
  expect(bulkSigner(Buffer.alloc(32, 8)).verify(token, { action: "redrive", region: "fsn1" }, NOW).ok).toBe(false);
  for (const junk of [undefined, 42, "", "a.b.c", "abc", `${body}.`, "x".repeat(9000)])
    expect(reason(junk)).toContain("token:");
});

test("the preview's question and the outcome's line", () => {
  expect(previewLine({ action: "redrive", count: 412, limit: 1000 })).toBe("412 tasks match; redrive them?");
  expect(previewLine({ action: "cancel", count: 1, limit: 1000 })).toBe("1 task matches; cancel it?");
  expect(previewLine({ action: "redrive", count: 0, limit: 1000 })).toBe("no task matches; nothing to redrive");
  expect(previewLine({ action: "redrive", count: 12_000, limit: 1000 })).toBe(
    "12,000 tasks match, over the limit of 1,000 per operation (CONSOLE_BULK_MAX); redrive the oldest 1,000?",
  );
  const base = { action: "redrive" as const, limit: 1000, refused: {} };
  expect(outcomeLine({ ...base, count: 412, previewed: 412, attempted: 412, done: 412 })).toBe(
    "redriven 412 of 412; 0 refused",
  );
  expect(outcomeLine({ ...base, count: 0, previewed: 200, attempted: 0, done: 0 })).toBe(
    "redriven 0 of 0; 0 refused; previewed 200, now 0",
  );
  expect(
    outcomeLine({
      ...base,
      count: 415,
      previewed: 412,
      attempted: 415,
      done: 412,
      refused: { purged: 2, not_failed: 1 },
    }),
  ).toBe(
    "redriven 412 of 415; 3 refused (2 params erased by retention, 1 state changed meanwhile (no longer failed)); previewed 412, now 415",
  );
  expect(outcomeLine({ action: "cancel", limit: 1000, count: 1500, attempted: 1000, done: 1000, refused: {} })).toBe(
    "cancelled 1,000 of 1,000; 0 refused; 500 more match beyond the limit of 1,000 (CONSOLE_BULK_MAX): run it again",
  );
});
