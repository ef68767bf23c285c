import { Problem, TaskAccepted, TaskView, taskRequest } from "@pipeline/shared/schemas";
import { z } from "zod";
import { PoolBody } from "../domain/pools.ts";
import { ReportBody } from "./v1/report.ts";

/** OpenAPI 3.1 document generated from the same zod schemas that validate requests. */
export function openApiDocument(opts: { imageMaxBytes: number }) {
  const schema = (s: z.ZodType, io: "input" | "output" = "output") => z.toJSONSchema(s, { io, unrepresentable: "any" });
  const problem = { "application/problem+json": { schema: { $ref: "#/components/schemas/Problem" } } };
  const errors = (...codes: number[]) =>
    Object.fromEntries(codes.map((c) => [String(c), { description: "problem", content: problem }]));
  return {
    openapi: "3.1.0",
    info: { title: "captcha-pipeline gateway", version: "1.0.0" },
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
      schemas: {
        TaskRequest: schema(taskRequest({ imageMaxBytes: opts.imageMaxBytes }), "input"),
        TaskAccepted: schema(TaskAccepted.extend({ status: z.string() })),
        TaskView: schema(TaskView),
        Problem: schema(Problem),
        ReportRequest: schema(ReportBody, "input"),
        PoolRequest: schema(PoolBody, "input"),
      },
    },
    security: [{ bearer: [] }],
    paths: {
      "/v1/tasks": {
        post: {
          summary: "Submit a task; 202 once it is in Postgres and acknowledged by JetStream",
          parameters: [
            { name: "Idempotency-Key", in: "header", required: false, schema: { type: "string", maxLength: 255 } },
          ],
          requestBody: {
            required: true,
            content: { "application/json": { schema: { $ref: "#/components/schemas/TaskRequest" } } },
          },
          responses: {
            "202": {
              description: "accepted",
              content: { "application/json": { schema: { $ref: "#/components/schemas/TaskAccepted" } } },
            },
            ...errors(400, 401, 403, 413, 415, 422, 429, 503),
          },
        },
      },
      "/v1/tasks/{id}": {
        get: {
          summary: "Read a task; ?wait=N long-polls up to N seconds for a terminal state",
          parameters: [
            { name: "id", in: "path", required: true, schema: { type: "string", format: "uuid" } },
            { name: "wait", in: "query", required: false, schema: { type: "integer", minimum: 0 } },
          ],
          responses: {
            "200": {
              description: "the task",
              content: { "application/json": { schema: { $ref: "#/components/schemas/TaskView" } } },
            },
            // 503: Postgres unreachable, or the result held by the task's home region, which does not answer.
            ...errors(400, 401, 404, 429, 503),
          },
        },
      },
      "/v1/usage": {
        get: {
          summary: "The calling API key's own figures (tasks in flight, spend) and quotas",
          responses: {
            "200": {
              description:
                "{clientId, day, inFlight, spendToday (estimate: accepted tasks × TASK_PRICES), spendTodaySource, spend (from the ledger: today and last30Days, micro-dollars), limits, prices}",
              content: { "application/json": { schema: { type: "object" } } },
            },
            ...errors(401, 429),
          },
        },
      },
      ...reportPaths(errors),
      ...poolPaths(errors),
      ...HEALTH_PATHS,
    },
  };
}

/** `POST /v1/tasks/{id}/report`: the client's verdict on its solved task, forwarded once to the provider. */
function reportPaths(errors: (...codes: number[]) => Record<string, unknown>) {
  return {
    "/v1/tasks/{id}/report": {
      post: {
        summary:
          "Report a solved task's answer as accepted or not by the site; forwarded once to the provider (a bad one is refunded). 404 for another key's task, 409 when reported already, not solved, or past REPORT_WINDOW_MS",
        parameters: [{ name: "id", in: "path", required: true, schema: { type: "string", format: "uuid" } }],
        requestBody: {
          required: true,
          content: { "application/json": { schema: { $ref: "#/components/schemas/ReportRequest" } } },
        },
        responses: {
          "202": { description: "{id, accepted, status: pending}: stored; a solver forwards it" },
          ...errors(400, 401, 404, 409, 429, 503),
        },
      },
    },
  };
}

/** Warm pools (docs/warm-pools.md): the calling key's own; another key's pool is a 404. */
function poolPaths(errors: (...codes: number[]) => Record<string, unknown>) {
  const name = {
    name: "name",
    in: "path",
    required: true,
    schema: { type: "string", pattern: "^[A-Za-z0-9_.-]{1,64}$" },
  };
  const view =
    "{name, type, params, priority, size, maxAgeSeconds, createdAt, updatedAt, solved, handedOut, wasted, inProgress, ready, failed, misses, hitRate, spendMicros, spend, costPerHandedOutMicros, costPerHandedOut, ledgerSpendMicros, spendSource}";
  return {
    "/v1/pools": {
      get: { summary: "The calling key's warm pools", responses: { "200": { description: `{pools: [${view}]}` } } },
    },
    "/v1/pools/{name}": {
      put: {
        summary:
          "Create (201) or change (200) a warm pool: size solved tokens of one type and params kept ready, each replaced before maxAgeSeconds (default: reCAPTCHA 110, Turnstile 290)",
        parameters: [name],
        requestBody: {
          required: true,
          content: { "application/json": { schema: { $ref: "#/components/schemas/PoolRequest" } } },
        },
        responses: { "200": { description: view }, "201": { description: view }, ...errors(400, 401, 409, 415) },
      },
      get: {
        summary: "The pool's settings and figures",
        parameters: [name],
        responses: { "200": { description: view }, ...errors(400, 401, 404) },
      },
      delete: {
        summary: "Close the pool: no refill, its ready tokens are never handed out; its figures at the close",
        parameters: [name],
        responses: { "200": { description: `${view} and deleted: true` }, ...errors(400, 401, 404) },
      },
    },
    "/v1/pools/{name}/take": {
      post: {
        summary:
          "A ready token at once (handed out once), else a task for the pool's params submitted as POST /v1/tasks",
        parameters: [name],
        responses: {
          "200": { description: "{pool: hit, token, userAgent?, taskId, solvedAt, ageMs}" },
          "202": {
            description:
              "{id, status, pool: miss}: no ready token; wait for the task as for any (Location: /v1/tasks/{id})",
          },
          ...errors(400, 401, 403, 404, 429, 503),
        },
      },
    },
  };
}

/** The health endpoints: no key needed. */
const HEALTH_PATHS = {
  "/healthz": { get: { security: [], responses: { "200": { description: "alive" } } } },
  "/readyz": {
    get: {
      security: [],
      responses: { "200": { description: "NATS and Postgres reachable" }, "503": { description: "not ready" } },
    },
  },
  "/readyz/accepting": {
    get: {
      security: [],
      summary: "The load balancers' check: ready, and the region takes new tasks (not fenced)",
      responses: {
        "200": { description: "{status: accepting}" },
        "503": { description: "{status: fenced | not ready}" },
      },
    },
  },
};
