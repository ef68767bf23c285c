// The hosts file the deploy command reads: Terraform's `inventory` output (infra/deploy/terraform),
// `terraform output -json inventory > inventory.json`. Parsed with zod; errors name the field.
import { readFileSync } from "node:fs";
import { z } from "zod";
import { LbField } from "./lb.ts";

export const Role = z.enum(["app", "nats", "postgres", "witness", "monitoring"]);

/**
 * A host key the deploy pins: the public key as in a `.pub` file or `ssh-keyscan` line
 * (`ssh-ed25519 AAAA...`, a comment after it is dropped), or its fingerprint as `ssh-keygen -l`
 * prints it (`SHA256:...`, 43 characters of base64), recorded at the host's first boot.
 */
export const HostKey = z
  .string()
  .trim()
  .regex(
    /^(?:(?:ssh-ed25519|ecdsa-sha2-nistp(?:256|384|521)|ssh-rsa) [A-Za-z0-9+/]+={0,3}(?: \S.*)?|SHA256:[A-Za-z0-9+/]{43})$/,
    "a public key ('ssh-ed25519 AAAA...') or its fingerprint ('SHA256:' and 43 characters of base64, as ssh-keygen -l prints it)",
  )
  .transform((k) => (k.startsWith("SHA256:") ? k : k.split(" ").slice(0, 2).join(" ")));

export const Host = z
  .object({
    name: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, "lower-case letters, digits and '-'"),
    region: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,31}$/),
    roles: z.array(Role).min(1),
    /** `deploy` by default: the app hosts' user whose sudo allows only the deploy's commands (infra/deploy/sudoers). */
    ssh: z
      .object({
        host: z.string().min(1),
        user: z.string().min(1).default("deploy"),
        port: z.number().int().min(1).max(65535).default(22),
      })
      .strict(),
    /** The host's SSH host keys or their fingerprints: the deploy connects to no app host without one, and to none whose key differs. */
    hostKeys: z.array(HostKey).default([]),
    privateIp: z.string().min(1).optional(),
    /** Where releases live on the host (default /opt/captcha-pipeline), read by the deploy user. */
    root: z.string().startsWith("/").default("/opt/captcha-pipeline"),
    /** The root-owned script that makes every root change of a deploy, run with sudo (infra/deploy/scripts/captcha-pipeline-install.sh). */
    install: z.string().startsWith("/").default("/usr/local/sbin/captcha-pipeline-install"),
  })
  .strict();
export type Host = z.infer<typeof Host>;

export const Inventory = z
  /** `lb`: the load balancer in front of the gateways (or one per region), taken out of rotation around a restart (lb.ts). */
  .object({ hosts: z.array(Host).min(1), lb: LbField.optional() })
  .strict()
  .superRefine((inv, ctx) => {
    inv.hosts.forEach((h, i) => {
      if (h.roles.includes("app") && h.hostKeys.length === 0)
        ctx.addIssue({
          code: "custom",
          path: ["hosts", i, "hostKeys"],
          message: `${h.name} is a deploy target and has no pinned host key: record its keys at first boot (docs/deploy.md)`,
        });
    });
  });
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
  if (!r.success)
    throw new Error(
      `inventory ${path}:\n${r.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`).join("\n")}`,
    );
  return r.data;
}
