import { expect, test } from "bun:test";
import { createSseParser } from "./sse.ts";

test("SSE: events split anywhere across chunks, CRLF or LF, comments and keep-alives skipped, multi-line data joined", () => {
  const text =
    'event: state\nid: 1\ndata: {"a":1}\n\n: keep-alive\n\nevent: state\r\nid: 2\r\ndata: x\r\ndata: y\r\n\r\ndata:plain\n\n';
  for (const size of [1, 2, 3, 7, text.length]) {
    const p = createSseParser();
    const got = [];
    for (let i = 0; i < text.length; i += size) got.push(...p.push(text.slice(i, i + size)));
    expect(got).toEqual([
      { event: "state", data: '{"a":1}', id: "1" },
      { event: "state", data: "x\ny", id: "2" },
      { event: "message", data: "plain", id: "2" },
    ]);
  }
});
