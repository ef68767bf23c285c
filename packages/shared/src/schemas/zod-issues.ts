import type { z } from "zod";

/** A field at fault, as problem+json lists it: a dotted path and a message. */
export interface FieldError {
  field: string;
  message: string;
}

/** "field: message; field: message": names each field at fault, never echoes a value (`root` names the whole document). */
export function describeIssues(error: z.ZodError, root = "(root)"): string {
  return fieldErrors(error)
    .map((f) => `${f.field === "(root)" ? root : f.field}: ${f.message}`)
    .join("; ");
}

/** Flattens zod issues into `{field, message}` pairs, naming the field by its dotted path. */
export function fieldErrors(error: z.ZodError, prefix = ""): FieldError[] {
  return error.issues.map((i) => {
    const path = i.path.map(String).join(".");
    const field = [prefix, path].filter(Boolean).join(".") || "(root)";
    return { field, message: i.message };
  });
}
