import { expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { checkBodies, splitBodies } from "./bodies.ts";

const body = Buffer.from("screenshot").toString("base64");

test("an image's body is taken out of its params, named by sha256 and size; other types keep theirs", () => {
  const s = splitBodies("image", { body, numeric: 1 });
  expect(s.params).toEqual({ numeric: 1 });
  expect(s.values).toEqual({ body });
  expect(s.refs).toEqual([
    { field: "body", sha256: createHash("sha256").update(body).digest("hex"), size: body.length },
  ]);
  const t = splitBodies("turnstile", { sitekey: "k", pageurl: "https://example.com" });
  expect(t).toEqual({ params: { sitekey: "k", pageurl: "https://example.com" }, refs: [], values: {} });
});

test("a BODIES message is checked against the event's references", () => {
  const { refs } = splitBodies("image", { body });
  expect(checkBodies(refs, { taskId: "t", bodies: { body } })).toEqual({ ok: true, values: { body } });
  expect(checkBodies(refs, { taskId: "t", bodies: { body: `${body}AA` } })).toMatchObject({
    ok: false,
    reason: "body does not match the sha256 the accepted event names",
  });
  expect(checkBodies(refs, { taskId: "t", bodies: {} })).toMatchObject({ ok: false });
  expect(checkBodies(refs, "not a message")).toMatchObject({ ok: false });
});
