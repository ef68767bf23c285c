// The infra tools' one way to run a command without blocking the event loop: spawn it, collect its
// output, SIGKILL it after a timeout (the deploy's ssh, the rehearsal's runAsync).

export interface Collected {
  code: number;
  stdout: string;
  stderr: string;
}

export interface CollectOptions {
  /** What the command reads: a text (a Blob, a Buffer) or a file (`Bun.file`); default nothing. */
  stdin?: Blob | Uint8Array | "ignore";
  /** The whole environment (default: this process's). */
  env?: Record<string, string | undefined>;
  /** The command is killed (SIGKILL) when it runs longer. */
  timeoutMs: number;
}

/** Runs argv to completion with its stdout and stderr collected; never throws on a failing command. */
export async function spawnCollect(argv: string[], o: CollectOptions): Promise<Collected> {
  const p = Bun.spawn(argv, {
    stdin: o.stdin ?? "ignore",
    stdout: "pipe",
    stderr: "pipe",
    ...(o.env ? { env: o.env } : {}),
  });
  const timer = setTimeout(() => p.kill("SIGKILL"), o.timeoutMs);
  const [stdout, stderr, code] = await Promise.all([
    new Response(p.stdout).text(),
    new Response(p.stderr).text(),
    p.exited,
  ]);
  clearTimeout(timer);
  return { code, stdout, stderr };
}
