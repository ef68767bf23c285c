// templatefile.ts's base64gzip: what Terraform's base64gzip makes (gzip, then base64), so a
// cloud-init `encoding: gz+b64` file decodes to the variable's text exactly.
import { expect, test } from "bun:test";
import { gunzipSync } from "node:zlib";
import { renderTemplateText, TemplateError } from "./templatefile.ts";

test("base64gzip(var): the variable gzip-compressed and base64-encoded, decoding to it byte for byte", () => {
  // The value is not itself a template: its `$${` and `%{` are written as they are.
  const script = "#!/bin/sh\n# ünïcode, $${not a template}, %{ nor a directive }\nexec true\n";
  const out = renderTemplateText("  content: ${base64gzip(script)}\n", { script }, "f.yaml");
  const m = /^ {2}content: ([A-Za-z0-9+/]+=*)\n$/.exec(out);
  expect(m).not.toBeNull();
  const gz = Buffer.from(m![1]!, "base64");
  // The gzip magic and deflate method: cloud-init's gz+b64 gunzips it.
  expect([...gz.subarray(0, 3)]).toEqual([0x1f, 0x8b, 8]);
  expect(gunzipSync(gz).toString("utf8")).toBe(script);
  // An empty variable is an empty file (still a gzip stream).
  const empty = renderTemplateText("${base64gzip(x)}", { x: "" }, "f.yaml");
  expect(gunzipSync(Buffer.from(empty, "base64")).toString("utf8")).toBe("");
});

test("base64gzip: one variable, given; anything else fails naming the file and the expression", () => {
  expect(() => renderTemplateText("${base64gzip(nope)}", {}, "f.yaml")).toThrow(
    /f\.yaml: \$\{base64gzip\(nope\)\}: no variable "nope"/,
  );
  expect(() => renderTemplateText("${base64gzip(2)}", {}, "f.yaml")).toThrow(/base64gzip takes \(<variable>\)/);
  expect(() => renderTemplateText("${base64gzip(a, b)}", { a: "1", b: "2" }, "f.yaml")).toThrow(TemplateError);
  expect(() => renderTemplateText("${indent(x, y)}", { x: "1", y: "2" }, "f.yaml")).toThrow(
    /indent takes \(<number>, <variable>\)/,
  );
  expect(() => renderTemplateText("${base64encode(x)}", { x: "1" }, "f.yaml")).toThrow(
    /unknown function "base64encode" \(known: indent, base64gzip\)/,
  );
});
