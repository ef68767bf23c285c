import { describe, expect, test } from "bun:test";
import { bare, code, ok, renderReply, replyStyleOf } from "./reply.ts";

const PLAIN = { json: false, acao: false };
const JSON_STYLE = { json: true, acao: false };

describe("protocol replies", () => {
  test("json=1 / header_acao=1 select the style; anything else is plain without CORS", () => {
    expect(replyStyleOf({ json: "1", header_acao: "1" })).toEqual({ json: true, acao: true });
    expect(replyStyleOf({ json: "true" })).toEqual({ json: true, acao: false });
    expect(replyStyleOf({ json: "0", header_acao: "0" })).toEqual({ json: false, acao: false });
    expect(replyStyleOf({})).toEqual({ json: false, acao: false });
  });

  test("an answer is OK|<value> in plain and {status:1,request} in JSON, extra fields only in JSON", () => {
    expect(renderReply(PLAIN, ok("tok", { useragent: "UA" })).body).toBe("OK|tok");
    expect(renderReply(JSON_STYLE, ok("tok", { useragent: "UA" })).body).toBe(
      '{"status":1,"request":"tok","useragent":"UA"}',
    );
    expect(renderReply(PLAIN, ok("tok", { price: "0" }, ["0"])).body).toBe("OK|tok|0");
    expect(renderReply(JSON_STYLE, ok("tok", { price: "0" }, ["0"])).body).toBe(
      '{"status":1,"request":"tok","price":"0"}',
    );
  });

  test("codes are bare in plain and status 0 in JSON; bare successes have no OK| prefix", () => {
    expect(renderReply(PLAIN, code("CAPCHA_NOT_READY")).body).toBe("CAPCHA_NOT_READY");
    expect(renderReply(JSON_STYLE, code("ERROR_WRONG_USER_KEY")).body).toBe(
      '{"status":0,"request":"ERROR_WRONG_USER_KEY"}',
    );
    expect(renderReply(PLAIN, bare("OK_REPORT_RECORDED")).body).toBe("OK_REPORT_RECORDED");
    expect(renderReply(JSON_STYLE, bare("1000000")).body).toBe('{"status":1,"request":"1000000"}');
  });

  test("content type follows the style; CORS only when asked", () => {
    expect(renderReply(PLAIN, code("X")).headers["content-type"]).toBe("text/plain; charset=utf-8");
    expect(renderReply(JSON_STYLE, code("X")).headers["content-type"]).toBe("application/json");
    expect(renderReply(PLAIN, code("X")).headers["access-control-allow-origin"]).toBeUndefined();
    expect(renderReply({ json: false, acao: true }, code("X")).headers["access-control-allow-origin"]).toBe("*");
  });
});
