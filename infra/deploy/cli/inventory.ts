// The hosts file the deploy command reads: Terraform's `inventory` output (infra/deploy/terraform),
// `terraform output -json inventory > inventory.json`. Parsed with zod; errors name the field.
import { readFileSync } from "node:fs";
import { z } from "zod";

export const Role = z.enum(["app", "nats", "postgres", "witness"]);

export const Host = z
  .object({
    name: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, "lower-case letters, digits and '-'"),
    region: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,31}$/),
    roles: z.array(Role).min(1),
    ssh: z.object({ host: z.string().min(1), user: z.string().min(1).default("root"), port: z.number().int().min(1).max(65535).default(22) }).strict(),
    privateIp: z.string().min(1).optional(),
    /** Where releases live on the host (default /opt/captcha-pipeline). */
    root: z.string().startsWith("/").default("/opt/captcha-pipeline"),
    /** Where the env files live (default /etc/captcha-pipeline). */
    etc: z.string().startsWith("/").default("/etc/captcha-pipeline"),
    /** The service manager's command (default systemctl; the SSH test's hosts have a stand-in, see docs/deploy.md). */
    systemctl: z.string().min(1).default("systemctl"),
  })
  .strict();
export type Host = z.infer<typeof Host>;

export const Inventory = z.object({ hosts: z.array(Host).min(1) }).strict();
export type Inventory = z.infer<typeof Inventory>;

/** Reads and checks an inventory file; the error names the file and each field at fault. */
export function readInventory(path: string): Inventory {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new Error(`inventory ${path}: ${(err as Error).message}`);
  }
  // `terraform output -json` wraps the value: { "value": {...}, "type": ..., "sensitive": false }.
  if (raw && typeof raw === "object" && "value" in raw && "type" in raw) raw = (raw as { value: unknown }).value;
  const r = Inventory.safeParse(raw);
  if (!r.success) throw new Error(`inventory ${path}:\n${r.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`).join("\n")}`);
  return r.data;
}
