// Terraform's templatefile, for what the project's templates use: `${name}`, `${indent(N, name)}`,
// `${base64gzip(name)}`, the escapes `$${` and `%%{`. Anything else fails loudly, naming the file and
// the expression: an unknown function, a variable without a value, a directive (`%{ ... }`).
// Terraform also refuses a variable it was not given, so a rendering here and there cannot quietly
// differ. base64gzip's bytes do differ (Go's deflate is not zlib's) but never its decoded text:
// infra/deploy/deploy-static.test.ts compares Terraform's rendering with this one, gz+b64 files decoded.
import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";

const FUNCTIONS: Record<string, (args: string[]) => string> = {
  /** indent(n, s): n spaces before every line of s but the first (Terraform's indent). */
  indent: ([n, s]) => s!.replaceAll("\n", `\n${" ".repeat(Number(n))}`),
  /** base64gzip(s): s gzip-compressed, then base64-encoded (a cloud-init `encoding: gz+b64` file). */
  base64gzip: ([s]) => gzipSync(Buffer.from(s!, "utf8")).toString("base64"),
};

/** Each function's arguments: "number" or "variable", in order. */
const SIGNATURES: Record<string, Array<"number" | "variable">> = {
  indent: ["number", "variable"],
  base64gzip: ["variable"],
};

export class TemplateError extends Error {}

export function renderTemplateText(text: string, vars: Record<string, string>, file = "<template>"): string {
  if (/(^|[^%])%\{/.test(text))
    throw new TemplateError(
      `${file}: template directives (%{...}) are not supported by infra/rehearsal/templatefile.ts`,
    );
  const value = (name: string, expr: string): string => {
    const v = vars[name];
    if (v === undefined)
      throw new TemplateError(
        `${file}: \${${expr}}: no variable ${JSON.stringify(name)} was given (given: ${Object.keys(vars).sort().join(", ")})`,
      );
    return v;
  };
  const out = text.replace(/(\$?)\$\{([^}]*)\}/g, (whole, escape: string, expr: string) => {
    if (escape) return whole.slice(1);
    const plain = /^\s*([a-z_][a-z0-9_]*)\s*$/i.exec(expr);
    if (plain) return value(plain[1]!, expr);
    const call = /^\s*([a-z_][a-z0-9_]*)\((.*)\)\s*$/i.exec(expr);
    if (!call) throw new TemplateError(`${file}: unsupported expression \${${expr}}`);
    const fn = FUNCTIONS[call[1]!];
    if (!fn)
      throw new TemplateError(
        `${file}: \${${expr}}: unknown function ${JSON.stringify(call[1])} (known: ${Object.keys(FUNCTIONS).join(", ")})`,
      );
    const args = call[2]!.split(",").map((a) => a.trim());
    const sig = SIGNATURES[call[1]!]!;
    if (args.length !== sig.length || sig.some((k, i) => (k === "number") !== /^\d+$/.test(args[i]!)))
      throw new TemplateError(`${file}: \${${expr}}: ${call[1]} takes (${sig.map((k) => `<${k}>`).join(", ")})`);
    return fn(
      args.map((a) => (/^\d+$/.test(a) ? a : /^[a-z_][a-z0-9_]*$/i.test(a) ? value(a, expr) : badArg(a, expr))),
    );
  });
  return out.replaceAll("%%{", "%{");
  function badArg(a: string, expr: string): never {
    throw new TemplateError(`${file}: \${${expr}}: argument ${JSON.stringify(a)} is neither a number nor a variable`);
  }
}

export function templatefile(file: string, vars: Record<string, string>): string {
  return renderTemplateText(readFileSync(file, "utf8"), vars, file);
}
