import { fileURLToPath } from "node:url";

export type { EmulatorBooks, KeyBooks } from "./books.ts";
export type { EmulatorConfigView, EmulatorTaskView } from "./control-api.ts";
export { createEmulator, type Emulator } from "./emulator.ts";
export { EmulatorEnv, loadEmulatorEnv } from "./env.ts";
export { FINGERPRINT_EXCLUDED, fingerprintOf } from "./fingerprint.ts";
export { formatMoney, PRICE_UNITS, UNITS_PER_DOLLAR } from "./money.ts";
export {
  DEFAULT_BALANCE,
  DEFAULT_KEYS,
  DEFAULT_MAX_IMAGE_BYTES,
  EmulatorConfigError,
  EmulatorConfigPatch,
  EmulatorMethod,
  type EmulatorOptions,
  EmulatorSettings,
  FaultConfig,
  KeyConfig,
  LatencyConfig,
} from "./settings.ts";
export type { EmulatorStats } from "./stats.ts";
export { SLOT_HOLD_AFTER_READY_MS, TASK_RETENTION_MS } from "./task-book.ts";

/**
 * Absolute path of a Node preload (`node --require <path>`) that, when env
 * `TWOCAPTCHA_REDIRECT=http://127.0.0.1:PORT` is set, sends the https requests of any library
 * to host 2captcha.com over plain http to that address (path and query kept). Without the
 * variable it changes nothing.
 */
export const redirect2captchaPreload: string = fileURLToPath(
  new URL("./testing/redirect-2captcha.cjs", import.meta.url),
);
