import { fileURLToPath } from "node:url";

export { createEmulator, type Emulator } from "./emulator.ts";
export { fingerprintOf, FINGERPRINT_EXCLUDED } from "./fingerprint.ts";
export type { EmulatorStats } from "./stats.ts";
export type { EmulatorTaskView, EmulatorConfigView } from "./control-api.ts";
export {
  EmulatorMethod,
  FaultConfig,
  KeyConfig,
  LatencyConfig,
  EmulatorSettings,
  EmulatorConfigPatch,
  EmulatorConfigError,
  DEFAULT_KEYS,
  DEFAULT_BALANCE,
  DEFAULT_MAX_IMAGE_BYTES,
  type EmulatorOptions,
} from "./settings.ts";
export { loadEmulatorEnv, EmulatorEnv } from "./env.ts";
export { PRICE_UNITS, formatMoney } from "./money.ts";
export { SLOT_HOLD_AFTER_READY_MS, TASK_RETENTION_MS } from "./task-book.ts";

/**
 * Absolute path of a Node preload (`node --require <path>`) that, when env
 * `TWOCAPTCHA_REDIRECT=http://127.0.0.1:PORT` is set, sends the https requests of any library
 * to host 2captcha.com over plain http to that address (path and query kept). Without the
 * variable it changes nothing.
 */
export const redirect2captchaPreload: string = fileURLToPath(new URL("./testing/redirect-2captcha.cjs", import.meta.url));
