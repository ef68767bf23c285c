// What every console browser test sets up the same way: Debian's chromium through playwright-core
// with the same flags, the recovery service serving its console against a running stack, and a
// page signed in with a console token.
import { join } from "node:path";
import { findChromium, freePort, natsEnv, waitForPort } from "@pipeline/devstack";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { PROVIDER_KEY, type Proc, type Stack, spawnApp } from "../harness.ts";

export const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

/** Debian's chromium (the tests need that one: a missing package must fail, not fall back). */
export async function launchChromium(tag: string): Promise<Browser> {
  const executablePath = findChromium((m) => console.error(`[${tag}] ${m}`));
  if (executablePath !== "/usr/bin/chromium") throw new Error(`[${tag}] chromium found at ${executablePath}`);
  return chromium.launch({ executablePath, headless: true, args: CHROMIUM_FLAGS });
}

/**
 * The recovery service with its console on a free port, against `s`'s NATS, Postgres and
 * emulator; `tokens` is its CONSOLE_TOKENS, `env` anything more. Answers once the console listens.
 */
export async function spawnConsole(
  s: Stack,
  o: { region: string; tokens: string; out: string; env?: Record<string, string> },
): Promise<{ recovery: Proc; base: string }> {
  const port = await freePort();
  const recovery = spawnApp(
    "recovery",
    "apps/recovery/src/main.ts",
    {
      NATS_URL: s.nats.url,
      ...natsEnv(s.nats, "recovery"),
      DATABASE_URL: s.tdb.url,
      REGION: o.region,
      LOG_LEVEL: "info",
      SNAPSHOT_DIR: join(o.out, "snapshots"),
      PROVIDER_URL: s.emu.url,
      PROVIDER_KEY,
      CONSOLE_PORT: String(port),
      CONSOLE_TOKENS: o.tokens,
      ...o.env,
    },
    s.logDir,
  );
  await waitForPort(port, 30_000);
  return { recovery, base: `http://127.0.0.1:${port}` };
}

/** A new browser context at `viewport`, signed in at `base` with `token` through the login form. */
export async function signInAs(
  browser: Browser,
  base: string,
  token: string,
  viewport = { width: 1280, height: 800 },
): Promise<{ ctx: BrowserContext; page: Page }> {
  const ctx = await browser.newContext({ viewport });
  const page = await ctx.newPage();
  await page.goto(`${base}/console`);
  if (!page.url().endsWith("/console/login")) throw new Error(`not sent to the login page: ${page.url()}`);
  await page.getByLabel("Operator token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(`${base}/console`);
  return { ctx, page };
}
