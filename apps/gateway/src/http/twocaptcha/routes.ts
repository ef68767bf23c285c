import { Hono } from "hono";
import type { GatewayDeps } from "../../deps.ts";
import type { Authenticator } from "../auth.ts";
import type { GatewayEnvVars } from "../env.ts";
import { inAction } from "./in.ts";
import { protocolBodyLimit, protocolHandler } from "./protocol.ts";
import { resAction } from "./res.ts";

/**
 * The 2Captcha v1 protocol (`in.php`/`res.php`) over the pipeline's tasks, for unmodified
 * 2Captcha/CaptchaAI clients. Submissions go through `submitTask` (row + PubAck, as
 * `POST /v1/tasks`); answers are always protocol replies, never problem+json. Mounted at `/`.
 */
export function twoCaptchaRoutes(deps: GatewayDeps, auth: Authenticator) {
  const app = new Hono<GatewayEnvVars>();
  // Only the facade's paths get these limits: a middleware on "*" here would, mounted at "/", cover every route.
  app.on(
    ["GET", "POST"],
    "/in.php",
    protocolBodyLimit(deps, "ERROR_TOO_BIG_CAPTCHA_FILESIZE"),
    protocolHandler(deps, auth, inAction(deps)),
  );
  app.on(
    ["GET", "POST"],
    "/res.php",
    protocolBodyLimit(deps, "ERROR_BAD_PARAMETERS"),
    protocolHandler(deps, auth, resAction(deps)),
  );
  return app;
}
