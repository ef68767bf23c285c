// `recovery assess`: one look at everything; exit 1 when something needs a human.
import { assessLive, renderAssessment } from "../../assess/assess.ts";
import type { CommandOf } from "../args.ts";
import { type CliEnv, natsWithin, print } from "../env.ts";

export async function assessCommand(cmd: CommandOf<"assess">, env: CliEnv): Promise<number> {
  const a = await assessLive(env.config, () => natsWithin(env, 3000));
  print(cmd.json, a, renderAssessment(a));
  return a.level === "fail" ? 1 : 0;
}
