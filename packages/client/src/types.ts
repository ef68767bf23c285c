// The shapes the gateway's /v1 answers with, written by hand (this package stands alone: no zod,
// no @pipeline/shared at run time), and small parsers that name the field at fault.

export type TaskType = "recaptcha_v2" | "recaptcha_v3" | "turnstile" | "geetest" | "image";
export type Priority = "high" | "normal" | "low";
/** What a client sees: the stored states, and `expired` (a completed task whose token outlived its validity). */
export type TaskStatus = "queued" | "solving" | "retrying" | "completed" | "failed" | "cancelled" | "expired";

export const TASK_TYPES: readonly TaskType[] = ["recaptcha_v2", "recaptcha_v3", "turnstile", "geetest", "image"];
export const PRIORITIES: readonly Priority[] = ["high", "normal", "low"];
export const TASK_STATUSES: readonly TaskStatus[] = [
  "queued",
  "solving",
  "retrying",
  "completed",
  "failed",
  "cancelled",
  "expired",
];
/** The statuses that do not change any more (a `failed` task changes again only through `retry`). */
export const FINAL_STATUSES: readonly TaskStatus[] = ["completed", "failed", "cancelled", "expired"];

export interface RecaptchaV2Params {
  sitekey: string;
  pageurl: string;
  invisible?: boolean;
  enterprise?: boolean;
  data_s?: string;
}
export interface RecaptchaV3Params {
  sitekey: string;
  pageurl: string;
  action?: string;
  min_score?: number;
  enterprise?: boolean;
}
export interface TurnstileParams {
  sitekey: string;
  pageurl: string;
  action?: string;
  cdata?: string;
}
export interface GeetestParams {
  gt: string;
  challenge: string;
  pageurl: string;
  api_server?: string;
}
export interface ImageParams {
  /** The image, base64. */
  body: string;
  phrase?: boolean;
  case_sensitive?: boolean;
  numeric?: 0 | 1 | 2 | 3 | 4;
  calc?: boolean;
  min_len?: number;
  max_len?: number;
  language?: 0 | 1 | 2;
  lang?: string;
  textinstructions?: string;
}

interface Common {
  priority?: Priority;
  /** Receives a signed POST (verifyCallback) once the task reaches a final state. */
  callbackUrl?: string;
}
/** The body of `POST /v1/tasks`. */
export type TaskRequest =
  | ({ type: "recaptcha_v2"; params: RecaptchaV2Params } & Common)
  | ({ type: "recaptcha_v3"; params: RecaptchaV3Params } & Common)
  | ({ type: "turnstile"; params: TurnstileParams } & Common)
  | ({ type: "geetest"; params: GeetestParams } & Common)
  | ({ type: "image"; params: ImageParams } & Common);

/** What `GET /v1/tasks/:id` answers (and each event of the stream, and a callback's body). */
export interface TaskView {
  id: string;
  type: TaskType;
  priority: Priority;
  status: TaskStatus;
  attempts: number;
  createdAt: string;
  updatedAt: string;
  completedAt: string | null;
  result?: { token: string; expiresAt: string | null; userAgent?: string };
  error?: { code: string; message?: string };
}

/** `POST /v1/tasks` and `POST /v1/tasks/:id/retry` (202). */
export interface TaskAccepted {
  id: string;
  status: TaskStatus;
  /** True when an earlier request with the same Idempotency-Key had created the task (the `idempotent-replayed` header). */
  replayed: boolean;
}

/** `POST /v1/tasks/:id/report` (202). */
export interface ReportAccepted {
  id: string;
  accepted: boolean;
  status: string;
}

/** RFC 9457 problem details, with the fields at fault. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail?: string;
  instance?: string;
  requestId?: string;
  errors?: { field: string; message: string }[];
}

/** A reply that is not what the API promises; `field` names the part at fault (`result.token`…). */
export class ReplyShapeError extends Error {
  override name = "ReplyShapeError";
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
  }
}

type Obj = Record<string, unknown>;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function object(v: unknown, field: string): Obj {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new ReplyShapeError(field, "not an object");
  return v as Obj;
}
function str(o: Obj, key: string, at: string): string {
  const v = o[key];
  if (typeof v !== "string") throw new ReplyShapeError(at + key, "not a string");
  return v;
}
function optStr(o: Obj, key: string, at: string): string | undefined {
  return o[key] === undefined ? undefined : str(o, key, at);
}
function nullableStr(o: Obj, key: string, at: string): string | null {
  return o[key] === null ? null : str(o, key, at);
}
function oneOf<T extends string>(o: Obj, key: string, at: string, allowed: readonly T[]): T {
  const v = str(o, key, at);
  if (!(allowed as readonly string[]).includes(v))
    throw new ReplyShapeError(at + key, `"${v}" is not one of ${allowed.join(", ")}`);
  return v as T;
}
function uuid(o: Obj, key: string, at: string): string {
  const v = str(o, key, at);
  if (!UUID.test(v)) throw new ReplyShapeError(at + key, "not a UUID");
  return v;
}
function isoDate(o: Obj, key: string, at: string): string {
  const v = str(o, key, at);
  if (Number.isNaN(Date.parse(v))) throw new ReplyShapeError(at + key, "not a date");
  return v;
}

/** A task view, checked field by field. */
export function parseTaskView(raw: unknown, at = ""): TaskView {
  const o = object(raw, at || "(body)");
  const attempts = o.attempts;
  if (typeof attempts !== "number" || !Number.isInteger(attempts))
    throw new ReplyShapeError(`${at}attempts`, "not an integer");
  const view: TaskView = {
    id: uuid(o, "id", at),
    type: oneOf(o, "type", at, TASK_TYPES),
    priority: oneOf(o, "priority", at, PRIORITIES),
    status: oneOf(o, "status", at, TASK_STATUSES),
    attempts,
    createdAt: isoDate(o, "createdAt", at),
    updatedAt: isoDate(o, "updatedAt", at),
    completedAt: o.completedAt === null ? null : isoDate(o, "completedAt", at),
  };
  if (o.result !== undefined) {
    const r = object(o.result, `${at}result`);
    const userAgent = optStr(r, "userAgent", `${at}result.`);
    view.result = {
      token: str(r, "token", `${at}result.`),
      expiresAt: nullableStr(r, "expiresAt", `${at}result.`),
      ...(userAgent !== undefined ? { userAgent } : {}),
    };
  }
  if (o.error !== undefined) {
    const e = object(o.error, `${at}error`);
    const message = optStr(e, "message", `${at}error.`);
    view.error = { code: str(e, "code", `${at}error.`), ...(message !== undefined ? { message } : {}) };
  }
  return view;
}

/** The 202 of a submit or a retry (`replayed` comes from the headers). */
export function parseAccepted(raw: unknown, replayed: boolean): TaskAccepted {
  const o = object(raw, "(body)");
  return { id: uuid(o, "id", ""), status: oneOf(o, "status", "", TASK_STATUSES), replayed };
}

/** The 202 of a report. */
export function parseReportAccepted(raw: unknown): ReportAccepted {
  const o = object(raw, "(body)");
  if (typeof o.accepted !== "boolean") throw new ReplyShapeError("accepted", "not a boolean");
  return { id: uuid(o, "id", ""), accepted: o.accepted, status: str(o, "status", "") };
}

/** A problem+json body; undefined when the body is not one (a proxy's HTML page, say). */
export function parseProblem(raw: unknown): Problem | undefined {
  if (typeof raw !== "object" || raw === null) return undefined;
  const o = raw as Obj;
  if (typeof o.title !== "string" || typeof o.status !== "number") return undefined;
  const p: Problem = { type: typeof o.type === "string" ? o.type : "about:blank", title: o.title, status: o.status };
  for (const k of ["detail", "instance", "requestId"] as const) if (typeof o[k] === "string") p[k] = o[k] as string;
  if (Array.isArray(o.errors))
    p.errors = o.errors
      .filter((e): e is Obj => typeof e === "object" && e !== null)
      .map((e) => ({ field: String(e.field ?? ""), message: String(e.message ?? "") }));
  return p;
}

/** The JSON body of a task callback (verify its signature first: verifyCallback). */
export interface CallbackBody {
  deliveryId: string;
  /** `task.completed`, `task.failed`, `task.cancelled`. */
  event: string;
  task: TaskView;
}

/** A callback's body, checked field by field (`task.status`…). */
export function parseCallbackBody(raw: unknown): CallbackBody {
  const o = object(raw, "(body)");
  return { deliveryId: str(o, "deliveryId", ""), event: str(o, "event", ""), task: parseTaskView(o.task, "task.") };
}
