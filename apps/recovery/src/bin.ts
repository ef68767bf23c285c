// The compiled recovery binary's entry: with no argument (or `serve`) the service loop of main.ts;
// with a command (`migrate`, `assess`, `snapshot`, ...) the operator CLI of cli.ts.
const [command] = Bun.argv.slice(2);
if (command === undefined || command === "serve") await import("./main.ts");
else await import("./cli.ts");

export {};
