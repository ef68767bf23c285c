// Checks of what the deploy leaves on the rehearsal's real hosts (systemd, sshd, sudo, journald),
// shared by tests/rehearsal.test.ts: where the apps' secrets are, and are not; what the deploy
// user may do with sudo.
import { readStore } from "../../infra/deploy/cli/secret-store.ts";
import { run } from "../../infra/rehearsal/exec.ts";
import { inMachine } from "../../infra/rehearsal/machine.ts";
import { sshArgs } from "../../infra/rehearsal/ops-ssh.ts";
import type { HostState } from "../../infra/rehearsal/state.ts";

/** Every value of the operator's secrets store (current and previous) long enough to be one. */
export function storeValues(storePath: string): string[] {
  const s = readStore(storePath);
  const all = Object.values(s.secrets).flatMap((e) => [e.value, e.previous?.value ?? ""]);
  return [...new Set(all.filter((v) => v.length >= 16))];
}

/**
 * Lines of `h`'s journal (every unit, the kernel's, cloud-init's), its processes' command lines, its
 * env files and its user-data that hold a value of `values`: how many, by where.
 */
export function leaksOn(h: HostState, values: string[]): Record<string, number> {
  const wheres = {
    journal: "journalctl --no-pager -o cat",
    commandLines: "ps -eo args",
    envFiles: "cat /etc/captcha-pipeline/*.env 2>/dev/null || true",
    userData: "cat /var/lib/cloud/instance/user-data.txt",
    cloudInitLog: "cat /var/log/cloud-init-output.log /var/log/cloud-init.log 2>/dev/null || true",
  };
  const script = [
    "umask 077; cat > /run/rh-secret-values",
    ...Object.entries(wheres).map(
      ([k, cmd]) => `printf '%s ' ${k}; { ${cmd}; } | grep -cFf /run/rh-secret-values || true`,
    ),
    "rm -f /run/rh-secret-values",
  ].join("\n");
  const r = inMachine(h, script, { input: `${values.join("\n")}\n`, timeoutMs: 60_000 });
  if (r.code !== 0) throw new Error(`${h.name}: ${r.stderr}`);
  return Object.fromEntries(
    r.stdout
      .trim()
      .split("\n")
      .map((l) => l.split(" "))
      .map(([k, n]) => [k!, Number(n)]),
  );
}

/** `cmd` run over SSH as the deploy user (the deploy's key), as the deploy command logs in. */
export function asDeploy(h: HostState, key: string, cmd: string) {
  return run(["ssh", ...sshArgs(key), `deploy@${h.ip}`, cmd], { timeoutMs: 30_000 });
}
