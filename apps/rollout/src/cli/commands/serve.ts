// `rollout serve`: the rollout service itself (apps/rollout/src/main.ts), in this process, with the
// environment the CLI resolved (a dev stack's settings when NATS_URL is unset).
export async function serveCommand(env: Record<string, string | undefined>): Promise<number> {
  Object.assign(process.env, env);
  await import("../../main.ts");
  return await new Promise<number>(() => {});
}
