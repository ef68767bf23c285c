// Runs an app's dev entry point against the running dev stack: `bun ../../infra/with-stack.ts
// <role> <script>` waits for `.data/dev-stack.json` (written by the infra dev task that turbo
// starts beside the apps), adds its settings under the environment's own, then runs the script
// in this process. Roles: gateway, solver, recovery, rollout (NATS users), none (the emulator).
import { resolve } from "node:path";
import { devStackEnv, devStackFile, NATS_ROLES_FOR_DEV, waitForDevStack } from "@pipeline/devstack";

const [role, script] = process.argv.slice(2);
if (!role || !script || !(NATS_ROLES_FOR_DEV as readonly string[]).includes(role)) {
  console.error(`usage: bun infra/with-stack.ts <${NATS_ROLES_FOR_DEV.join("|")}> <script>`);
  process.exit(2);
}
const file = devStackFile();
const stack = await waitForDevStack(file, 180_000, () =>
  console.error(`[${role}] waiting for the dev stack (${file})`),
).catch((e: Error) => {
  console.error(`[${role}] ${e.message}`);
  process.exit(1);
});
Object.assign(process.env, devStackEnv(stack, role === "none" ? undefined : (role as never), process.env));
await import(resolve(script));
