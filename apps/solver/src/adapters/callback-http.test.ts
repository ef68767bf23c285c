// The callback client against a real HTTP receiver on loopback: a receiver that answers with an
// endless body cannot hold a solver's delivery slot or memory (issue 14, item 4).
import { afterAll, expect, test } from "bun:test";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { pinnedPost } from "./callback-http.ts";

let written = 0;
let closedAt = 0;
const server = http.createServer((req, res) => {
  req.resume();
  res.writeHead(200, { "content-type": "application/octet-stream" });
  const chunk = Buffer.alloc(64 * 1024, 120);
  const pump = () => {
    while (written < 200 * 1024 * 1024) {
      written += chunk.length;
      if (!res.write(chunk)) return void res.once("drain", pump);
    }
    res.end();
  };
  res.on("close", () => (closedAt = Date.now()));
  pump();
});
await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
const port = (server.address() as AddressInfo).port;
afterAll(() => new Promise<void>((r) => server.close(() => r())));

test("an endless response body is cut after 64 kB: the status counts, the connection is closed, the receiver stops far short of its 200 MB", async () => {
  const t0 = Date.now();
  const r = await pinnedPost()({
    url: new URL(`http://receiver.example:${port}/hook`),
    address: "127.0.0.1",
    family: 4,
    headers: { "content-type": "application/json" },
    body: "{}",
    timeoutMs: 5000,
  });
  expect(r.status).toBe(200);
  for (let i = 0; i < 100 && !closedAt; i++) await Bun.sleep(20);
  expect(closedAt).toBeGreaterThan(0);
  expect(closedAt - t0).toBeLessThan(3000);
  // What the kernel buffers on loopback before the client's reset, not the 200 MB asked for.
  expect(written).toBeLessThan(32 * 1024 * 1024);
});
