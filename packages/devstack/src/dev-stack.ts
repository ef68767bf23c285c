// Writing the running dev stack's connection settings (`infra/stack.ts`, the `dev` task of the
// @pipeline/infra workspace) and waiting for them (`infra/with-stack.ts`). Reading them is
// @pipeline/shared/dev-stack-file's, which the apps' CLIs use too; it is re-exported here so the
// dev side has one import. The file holds no password: it points at the 0600 credentials files.
import { chmodSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { type DevStack, type PgCredentials, readDevStack } from "@pipeline/shared/dev-stack-file";
import { NATS_ROLES } from "@pipeline/shared/nats";

export {
  DevStack,
  devStackDatabaseUrl,
  devStackEnv,
  devStackFile,
  PgCredentials,
  readDevStack,
} from "@pipeline/shared/dev-stack-file";

export function writeDevStack(file: string, stack: DevStack): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(stack, null, 2)}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, file);
}

export function removeDevStack(file: string, pid = process.pid): void {
  const s = readDevStack(file);
  if (!s || s.pid === pid) rmSync(file, { force: true });
}

/** Waits for a running dev stack (the infra task starts alongside the apps under turbo). */
export async function waitForDevStack(file: string, timeoutMs: number, onWait?: () => void): Promise<DevStack> {
  const until = Date.now() + timeoutMs;
  let said = false;
  for (;;) {
    const s = readDevStack(file);
    if (s) return s;
    if (Date.now() > until)
      throw new Error(
        `no dev stack in ${file} after ${Math.round(timeoutMs / 1000)} s: is the @pipeline/infra dev task running (turbo run dev)?`,
      );
    if (!said) onWait?.();
    said = true;
    await Bun.sleep(200);
  }
}

/** Writes the logins file (0600: it holds passwords). */
export function writePgCredentials(file: string, c: PgCredentials): void {
  writeFileSync(file, `${JSON.stringify(c, null, 2)}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
}

/** The roles `infra/with-stack.ts` accepts: the NATS users, and `none` for an app without NATS. */
export const NATS_ROLES_FOR_DEV = [...NATS_ROLES.filter((r) => r !== "admin"), "none"] as const;
