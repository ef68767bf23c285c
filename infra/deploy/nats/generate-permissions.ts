// Writes infra/deploy/nats/permissions.json: each NATS user's subject permissions on a region's
// server, from rolePermissions (packages/shared/src/nats/permissions.ts), with the region written
// as @region@ (subjects, buckets) and @REGION@ (stream names). Terraform substitutes the region
// (infra/deploy/terraform/modules/userdata). infra/deploy/deploy-static.test.ts fails when the file is stale:
//   bun infra/deploy/nats/generate-permissions.ts
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { NATS_ROLES, rolePermissions } from "@pipeline/shared/nats";

/** A region name that appears nowhere else, replaced by the placeholders. */
const SENTINEL = "zzregionzz";

/** Every role's permissions with both allow and deny lists (empty when the role has none). */
export function permissionsTemplate(): Record<
  string,
  { publish: { allow: string[]; deny: string[] }; subscribe: { allow: string[]; deny: string[] } }
> {
  const out: ReturnType<typeof permissionsTemplate> = {};
  const sub = (s: string) => s.replaceAll(SENTINEL, "@region@").replaceAll(SENTINEL.toUpperCase(), "@REGION@");
  for (const role of NATS_ROLES) {
    const p = rolePermissions(role, [SENTINEL]);
    out[role] = {
      publish: { allow: p.publish.allow.map(sub), deny: (p.publish.deny ?? []).map(sub) },
      subscribe: { allow: p.subscribe.allow.map(sub), deny: (p.subscribe.deny ?? []).map(sub) },
    };
  }
  return out;
}

export function permissionsJson(): string {
  return `${JSON.stringify(permissionsTemplate(), null, 2)}\n`;
}

if (import.meta.main) {
  const file = join(import.meta.dir, "permissions.json");
  writeFileSync(file, permissionsJson());
  console.log(`wrote ${file}`);
}
