// The parts of nats-server's monitoring JSON (`/varz`, `/jsz`, `/healthz`) the exporter reads, as
// zod schemas: a field of the wrong type or missing is refused with its path named, rather than
// exported as a wrong number.
import { describeIssues } from "@pipeline/shared/schemas";
import { z } from "zod";

const Count = z.number().nonnegative();

export const Varz = z.object({
  server_id: z.string(),
  server_name: z.string(),
  version: z.string(),
  start: z.iso.datetime({ offset: true }),
  now: z.iso.datetime({ offset: true }),
  mem: Count,
  cpu: z.number().nonnegative(),
  connections: Count,
  total_connections: Count,
  routes: Count,
  remotes: Count,
  leafnodes: Count,
  subscriptions: Count,
  slow_consumers: Count,
  in_msgs: Count,
  out_msgs: Count,
  in_bytes: Count,
  out_bytes: Count,
  cluster: z.object({ name: z.string().optional() }).optional(),
  // `{}` when JetStream is off; `config` once it is on.
  jetstream: z.object({ config: z.object({ domain: z.string().optional() }).optional() }).optional(),
});
export type Varz = z.infer<typeof Varz>;

const Sequence = z.object({ consumer_seq: Count, stream_seq: Count });

export const ConsumerDetail = z.object({
  name: z.string(),
  num_pending: Count,
  num_ack_pending: Count,
  num_redelivered: Count,
  num_waiting: Count,
  delivered: Sequence,
  ack_floor: Sequence,
});
export type ConsumerDetail = z.infer<typeof ConsumerDetail>;

/** A mirror or a source of a stream: `active` is nanoseconds since it last heard from the origin. */
export const StreamSource = z.object({ name: z.string(), lag: Count, active: z.number() });
export type StreamSource = z.infer<typeof StreamSource>;

export const StreamDetail = z.object({
  name: z.string(),
  cluster: z.object({ leader: z.string().optional() }).optional(),
  state: z.object({ messages: Count, bytes: Count, first_seq: Count, last_seq: Count, consumer_count: Count }),
  mirror: StreamSource.optional(),
  sources: z.array(StreamSource).optional(),
  consumer_detail: z.array(ConsumerDetail).optional(),
});
export type StreamDetail = z.infer<typeof StreamDetail>;

export const Jsz = z.object({
  disabled: z.boolean().optional(),
  memory: Count,
  storage: Count,
  streams: Count,
  consumers: Count,
  messages: Count,
  bytes: Count,
  api: z.object({ total: Count, errors: Count }),
  config: z.object({ max_memory: Count, max_storage: Count }).optional(),
  meta_cluster: z
    .object({
      name: z.string().optional(),
      leader: z.string().optional(),
      cluster_size: Count.optional(),
      replicas: z
        .array(z.object({ name: z.string(), current: z.boolean(), offline: z.boolean().optional() }))
        .optional(),
    })
    .optional(),
  account_details: z.array(z.object({ name: z.string(), stream_detail: z.array(StreamDetail).optional() })).optional(),
});
export type Jsz = z.infer<typeof Jsz>;

/** `/healthz`: `{"status":"ok"}`, else a status and the reason (with HTTP 503). */
export const Healthz = z.object({ status: z.string(), error: z.string().optional() });
export type Healthz = z.infer<typeof Healthz>;

export const MONITOR_ENDPOINTS = {
  varz: { path: "/varz", schema: Varz },
  jsz: { path: "/jsz?accounts=true&streams=true&consumers=true", schema: Jsz },
  healthz: { path: "/healthz", schema: Healthz },
} as const;
export type MonitorEndpoint = keyof typeof MONITOR_ENDPOINTS;

/** Raised when an endpoint's JSON does not have the shape the exporter reads; the message names each field at fault. */
export class MonitorJsonError extends Error {
  override name = "MonitorJsonError";
  constructor(
    readonly endpoint: MonitorEndpoint,
    message: string,
  ) {
    super(`${endpoint}: ${message}`);
  }
}

/** Parses one endpoint's body; throws a MonitorJsonError naming the endpoint and each field at fault (never a value). */
export function parseMonitorJson<E extends MonitorEndpoint>(
  endpoint: E,
  body: unknown,
): z.infer<(typeof MONITOR_ENDPOINTS)[E]["schema"]> {
  const r = MONITOR_ENDPOINTS[endpoint].schema.safeParse(body);
  if (!r.success) throw new MonitorJsonError(endpoint, describeIssues(r.error));
  return r.data as z.infer<(typeof MONITOR_ENDPOINTS)[E]["schema"]>;
}
