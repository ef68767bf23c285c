// The app hosts' env files, from the project's templates (infra/deploy/env/*.env.example) with
// real values: every `KEY=` line of a template kept in its order, its value replaced where the
// rehearsal gives one; a template value still holding a `<placeholder>` with no value given is an
// error, as is a value given for a key the template lacks (unless it is in `extra`). `ifPresent`
// values (secrets, which a template may or may not hold) are written only where the template has the key.
import { readFileSync } from "node:fs";
import { join } from "node:path";

export function renderEnvTemplate(
  file: string,
  values: Record<string, string>,
  o: { drop?: string[]; extra?: Record<string, string>; ifPresent?: Record<string, string> } = {},
): string {
  const text = readFileSync(file, "utf8");
  const seen = new Set<string>();
  const out: string[] = [];
  for (const line of text.split("\n")) {
    const m = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(line);
    if (!m) {
      out.push(line);
      continue;
    }
    const [, key, value] = m as unknown as [string, string, string];
    if (o.drop?.includes(key)) {
      out.push(`# ${key}: not used by the rehearsal (one region)`);
      continue;
    }
    seen.add(key);
    if (key in values) out.push(`${key}=${values[key]}`);
    else if (o.ifPresent && key in o.ifPresent) out.push(`${key}=${o.ifPresent[key]}`);
    else if (/<[^>]*>/.test(value))
      throw new Error(`${file}: ${key} is a placeholder (${value}) and the rehearsal gives no value for it`);
    else out.push(line);
  }
  for (const key of Object.keys(values))
    if (!seen.has(key))
      throw new Error(`${file}: the rehearsal sets ${key}, which the template does not have (pass it in extra)`);
  for (const [k, v] of Object.entries(o.extra ?? {})) out.push(`${k}=${v}`);
  return `${out.join("\n").trimEnd()}\n`;
}

export const envTemplate = (repo: string, name: string) => join(repo, "infra", "deploy", "env", `${name}.env.example`);

/** Whether the template's value of `key` holds a `<placeholder>` (a secret the operator fills in). */
export function hasPlaceholder(file: string, key: string): boolean {
  const m = new RegExp(`^${key}=(.*)$`, "m").exec(readFileSync(file, "utf8"));
  return !!m && /<[^>]*>/.test(m[1]!);
}
