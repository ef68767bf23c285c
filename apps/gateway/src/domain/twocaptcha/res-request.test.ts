import { describe, expect, test } from "bun:test";
import { MAX_BULK_IDS, parseResRequest } from "./res-request.ts";

const A = "0190a000-0000-7000-8000-000000000001";
const B = "0190A000-0000-7000-8000-000000000002";

describe("res.php request", () => {
  test("get with one id, ids normalised to lower case", () => {
    expect(parseResRequest({ action: "get", id: ` ${B} ` })).toEqual({
      ok: true,
      request: { action: "get", ids: [B.toLowerCase()], bulk: false },
    });
  });
  test("bulk get with ids=a,b wins over id", () => {
    expect(parseResRequest({ action: "get", ids: `${A}, ${B},`, id: A })).toEqual({
      ok: true,
      request: { action: "get", ids: [A, B.toLowerCase()], bulk: true },
    });
  });
  test("a malformed or missing id is ERROR_WRONG_ID_FORMAT", () => {
    const cases: Array<Record<string, string>> = [
      { action: "get" },
      { action: "get", id: "4123" },
      { action: "get", ids: `${A},7` },
      { action: "get", ids: "" },
      { action: "get2", ids: A },
      { action: "reportbad", id: "x" },
    ];
    for (const params of cases) {
      expect(parseResRequest(params)).toEqual({ ok: false, code: "ERROR_WRONG_ID_FORMAT" });
    }
  });
  test(`more than ${MAX_BULK_IDS} ids is ERROR_BAD_PARAMETERS`, () => {
    expect(
      parseResRequest({
        action: "get",
        ids: Array(MAX_BULK_IDS + 1)
          .fill(A)
          .join(","),
      }),
    ).toEqual({ ok: false, code: "ERROR_BAD_PARAMETERS" });
  });
  test("get2, reports and getbalance", () => {
    expect(parseResRequest({ action: "get2", id: A })).toEqual({ ok: true, request: { action: "get2", id: A } });
    expect(parseResRequest({ action: "reportgood", id: A })).toEqual({
      ok: true,
      request: { action: "reportgood", id: A },
    });
    expect(parseResRequest({ action: "getbalance" })).toEqual({ ok: true, request: { action: "getbalance" } });
  });
  test("a missing or unknown action is ERROR_EMPTY_ACTION", () => {
    expect(parseResRequest({ id: A })).toEqual({ ok: false, code: "ERROR_EMPTY_ACTION" });
    expect(parseResRequest({ action: "add_pingback", id: A })).toEqual({ ok: false, code: "ERROR_EMPTY_ACTION" });
  });
});
