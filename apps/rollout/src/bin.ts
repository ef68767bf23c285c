// The compiled rollout binary's entry: with no argument (or `serve`) the rollout service of
// main.ts; with a command (`status`, `start v2`, `pause`, `history`, ...) the operator CLI of cli.ts.
const [command] = Bun.argv.slice(2);
if (command === undefined || command === "serve") await import("./main.ts");
else await import("./cli.ts");

export {};
