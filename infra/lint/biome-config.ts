// biome.json is generated from this file: each import fence is written once here and composed per
// folder (Biome's overrides replace a rule's options instead of merging them, so a folder under two
// fences needs both in one list; writing that by hand copied every group into every override).
// `bun infra/lint/biome-config.ts --write` rewrites biome.json; `npm run lint` fails when biome.json
// differs from what this file makes.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

interface Fence {
  group: string[];
  message: string;
}

const APPS = ["gateway", "solver", "recovery", "rollout"] as const;
type App = (typeof APPS)[number];

/** Nothing outside tests/ imports tests/. */
const noTests: Fence = {
  group: ["**/tests/**", "**/tests"],
  message: "nothing outside tests/ imports tests/: shared test helpers live in @pipeline/devstack/testing",
};

/** No app imports another. */
const noOtherApp = (app: App): Fence => {
  const others = APPS.filter((a) => a !== app);
  return {
    group: [...others.map((a) => `**/${a}/src/**`), ...others.map((a) => `@pipeline/${a}`)],
    message: "no app imports another: share through packages/shared",
  };
};

/** Root tests/ run the apps as processes; what tests an app's internals lives beside the app. */
const noAppInternals: Fence = {
  group: ["**/apps/*/src/**", ...APPS.map((a) => `@pipeline/${a}`), ...APPS.map((a) => `@pipeline/${a}/**`)],
  message:
    "tests/ runs the apps as processes and talks to them over HTTP, NATS and SQL; a test of an app's internals lives beside the code (apps/<app>/src/**/*.int.test.ts)",
};

/** domain/ folders are pure: no wiring module of their app... */
const pureDomain = (wiring: string[]): Fence => ({
  group: wiring,
  message: "domain/ is pure: it imports no adapter, worker, HTTP or wiring module",
});
/** ...and no I/O library. */
const noIo: Fence = {
  group: [
    "@nats-io/*",
    "postgres",
    "drizzle-orm",
    "drizzle-orm/*",
    "hono",
    "hono/*",
    "pino",
    "prom-client",
    "node:fs",
    "node:net",
    "node:http",
    "node:child_process",
    "@pipeline/shared/db",
    "@pipeline/shared/nats",
    "@pipeline/devstack",
  ],
  message: "domain/ does no I/O: no broker, database, HTTP, logging or file system library",
};
const SERVICE_WIRING = [
  "**/adapters/**",
  "**/worker/**",
  "**/http/**",
  "**/usecases/**",
  "**/notifier/**",
  "../service.ts",
  "../config.ts",
];
const DOMAIN_WIRING: Record<string, string[]> = {
  gateway: [...SERVICE_WIRING, "../tasks/**", "../../tasks/**", "../deps.ts", "../../deps.ts"],
  solver: SERVICE_WIRING,
  rollout: [
    "**/adapters/**",
    "**/cli/**",
    "../cli.ts",
    "../controller.ts",
    "../service.ts",
    "../config.ts",
    "../main.ts",
    "../bin.ts",
  ],
};

/** packages/shared's nats/ is its lower layer. */
const natsLowerLayer: Fence = {
  group: [
    ...["kv", "shards", "service", "regions"].flatMap((d) => [`../${d}`, `../${d}/**`]),
    "../provision.ts",
    ...["kv", "shards", "provision", "service", "regions"].map((d) => `@pipeline/shared/${d}`),
  ],
  message:
    "nats/ is the lower layer of @pipeline/shared: kv/, shards/, provision.ts build on it, it never imports them; a name it needs belongs in subjects.ts",
};

const override = (includes: string[], fences: Fence[]) => ({
  includes,
  linter: { rules: { style: { noRestrictedImports: { level: "error", options: { patterns: fences } } } } },
});

export function biomeConfig(): Record<string, unknown> {
  return {
    $schema: "./node_modules/@biomejs/biome/configuration_schema.json",
    vcs: { enabled: true, clientKind: "git", useIgnoreFile: true },
    files: {
      includes: [
        "apps/**/*.ts",
        "packages/**/*.ts",
        "infra/**/*.ts",
        "tests/**/*.ts",
        "bench/**/*.ts",
        "!**/node_modules",
        // The rehearsal's machines (mounted roots, live NATS stores) are under .data: never scanned.
        "!**/.data",
        "!**/*.gen.ts",
      ],
    },
    formatter: { enabled: true, indentStyle: "space", indentWidth: 2, lineWidth: 120 },
    javascript: { formatter: { quoteStyle: "double", trailingCommas: "all", semicolons: "always" } },
    json: { formatter: { enabled: false } },
    assist: { enabled: true, actions: { source: { organizeImports: "on" } } },
    linter: {
      enabled: true,
      rules: {
        preset: "none",
        suspicious: { noDebugger: "error", noDoubleEquals: "error" },
        // Barrels name what they export: `export *` hides what a subpath offers and what it leaks.
        performance: { noReExportAll: "error" },
      },
    },
    overrides: [
      override(["packages/**", "infra/**", "bench/**"], [noTests]),
      override(["tests/**"], [noAppInternals]),
      ...APPS.map((app) => override([`apps/${app}/**`], [noTests, noOtherApp(app)])),
      ...Object.entries(DOMAIN_WIRING).map(([app, wiring]) =>
        override([`apps/${app}/src/domain/**`], [noTests, noOtherApp(app as App), pureDomain(wiring), noIo]),
      ),
      override(["packages/shared/src/nats/**", "!**/*.test.ts"], [noTests, natsLowerLayer]),
    ],
  };
}

export const renderBiomeConfig = () => `${JSON.stringify(biomeConfig(), null, 2)}\n`;

if (import.meta.main) {
  const file = join(import.meta.dir, "..", "..", "biome.json");
  if (process.argv.includes("--write")) writeFileSync(file, renderBiomeConfig());
  else if (readFileSync(file, "utf8") !== renderBiomeConfig()) {
    console.error("biome.json differs from infra/lint/biome-config.ts: run `bun infra/lint/biome-config.ts --write`");
    process.exit(1);
  }
}
