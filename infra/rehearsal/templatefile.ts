// Terraform's templatefile, for what the project's templates use: `${name}`, `${indent(N, name)}`,
// the escapes `$${` and `%%{`. Anything else fails loudly, naming the file and the expression: an
// unknown function, a variable without a value, a directive (`%{ ... }`). Terraform also refuses a
// variable it was not given, so a rendering here and there cannot quietly differ.
import { readFileSync } from "node:fs";

const FUNCTIONS: Record<string, (args: string[]) => string> = {
  /** indent(n, s): n spaces before every line of s but the first (Terraform's indent). */
  indent: ([n, s]) => s!.replaceAll("\n", `\n${" ".repeat(Number(n))}`),
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
    if (call[1] === "indent" && (args.length !== 2 || !/^\d+$/.test(args[0]!)))
      throw new TemplateError(`${file}: \${${expr}}: indent takes (<number>, <variable>)`);
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
