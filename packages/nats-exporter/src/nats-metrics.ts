// The mapping from nats-server's monitoring JSON to Prometheus samples: pure, no I/O.
import type { Sample } from "./exposition.ts";
import type { Healthz, Jsz, MonitorEndpoint, StreamSource, Varz } from "./monitor-json.ts";

/** What one scrape of a server's monitoring port gave: each endpoint parsed, or the reason it is missing. */
export interface MonitorSnapshot {
  varz?: Varz;
  jsz?: Jsz;
  healthz?: Healthz;
  /** Endpoints that did not answer or did not parse, with the reason (named field, status, network error). */
  errors: Partial<Record<MonitorEndpoint, string>>;
}

const ENDPOINTS: MonitorEndpoint[] = ["varz", "jsz", "healthz"];

type Add = (name: string, help: string, value: number, labels?: Record<string, string>) => void;

function varzSamples(v: Varz, gauge: Add, counter: Add): void {
  gauge("nats_server_info", "The server's identity (value 1)", 1, {
    server_name: v.server_name,
    server_id: v.server_id,
    version: v.version,
    cluster: v.cluster?.name ?? "",
    domain: v.jetstream?.config?.domain ?? "",
  });
  gauge(
    "nats_server_uptime_seconds",
    "Seconds since the server started",
    (Date.parse(v.now) - Date.parse(v.start)) / 1000,
  );
  gauge("nats_server_mem_bytes", "Resident memory of the server", v.mem);
  gauge("nats_server_cpu_percent", "CPU use of the server (100 = one core)", v.cpu);
  gauge("nats_server_connections", "Client connections open", v.connections);
  counter("nats_server_connections_total", "Client connections accepted since start", v.total_connections);
  gauge("nats_server_routes", "Cluster routes connected", v.routes);
  gauge("nats_server_remotes", "Remote cluster servers known", v.remotes);
  gauge("nats_server_leafnodes", "Leafnode connections", v.leafnodes);
  gauge("nats_server_subscriptions", "Subscriptions held", v.subscriptions);
  counter("nats_server_slow_consumers_total", "Clients dropped or stalled for being slow", v.slow_consumers);
  counter("nats_server_in_msgs_total", "Messages received", v.in_msgs);
  counter("nats_server_out_msgs_total", "Messages sent", v.out_msgs);
  counter("nats_server_in_bytes_total", "Bytes received", v.in_bytes);
  counter("nats_server_out_bytes_total", "Bytes sent", v.out_bytes);
  gauge("nats_jetstream_enabled", "1 when JetStream is on in this server", v.jetstream?.config ? 1 : 0);
}

function sourceSamples(kind: "mirror" | "source", s: StreamSource, labels: Record<string, string>, gauge: Add): void {
  const l = { ...labels, origin: s.name };
  gauge(`nats_stream_${kind}_lag`, `Messages of the ${kind}'s origin not yet copied`, s.lag, l);
  // `active` is -1 (or absent) before it ever heard from the origin: no age to report then.
  if (s.active >= 0)
    gauge(
      `nats_stream_${kind}_active_seconds`,
      `Seconds since the ${kind} last heard from its origin`,
      s.active / 1e9,
      l,
    );
}

function jszSamples(j: Jsz, serverName: string | undefined, gauge: Add, counter: Add): void {
  gauge("nats_jetstream_streams", "Streams held by this server", j.streams);
  gauge("nats_jetstream_consumers", "Consumers held by this server", j.consumers);
  gauge("nats_jetstream_messages", "Messages stored by this server", j.messages);
  gauge("nats_jetstream_bytes", "Bytes of messages stored by this server", j.bytes);
  gauge("nats_jetstream_memory_bytes", "Memory storage in use", j.memory);
  gauge("nats_jetstream_storage_bytes", "File storage in use", j.storage);
  if (j.config) {
    gauge("nats_jetstream_max_memory_bytes", "Memory storage limit", j.config.max_memory);
    gauge("nats_jetstream_max_storage_bytes", "File storage limit", j.config.max_storage);
  }
  counter("nats_jetstream_api_requests_total", "JetStream API requests served", j.api.total);
  counter("nats_jetstream_api_errors_total", "JetStream API requests that failed", j.api.errors);
  if (j.meta_cluster) {
    const m = j.meta_cluster;
    const cluster = { cluster: m.name ?? "" };
    gauge(
      "nats_jetstream_meta_leader_known",
      "1 when this server knows a JetStream meta leader",
      m.leader ? 1 : 0,
      cluster,
    );
    if (serverName)
      gauge(
        "nats_jetstream_meta_is_leader",
        "1 when this server is the meta leader",
        m.leader === serverName ? 1 : 0,
        cluster,
      );
    if (m.cluster_size !== undefined)
      gauge("nats_jetstream_meta_cluster_size", "Servers in the JetStream meta group", m.cluster_size, cluster);
    for (const r of m.replicas ?? []) {
      const l = { ...cluster, peer: r.name };
      gauge("nats_jetstream_meta_peer_current", "1 when a peer of the meta group is current", r.current ? 1 : 0, l);
      gauge("nats_jetstream_meta_peer_offline", "1 when a peer of the meta group is offline", r.offline ? 1 : 0, l);
    }
  }
  for (const a of j.account_details ?? []) {
    for (const s of a.stream_detail ?? []) {
      const sl = { account: a.name, stream: s.name };
      gauge("nats_stream_messages", "Messages in the stream", s.state.messages, sl);
      gauge("nats_stream_bytes", "Bytes in the stream", s.state.bytes, sl);
      gauge("nats_stream_first_seq", "Sequence of the oldest message held", s.state.first_seq, sl);
      gauge("nats_stream_last_seq", "Sequence of the newest message", s.state.last_seq, sl);
      gauge("nats_stream_consumers", "Consumers of the stream", s.state.consumer_count, sl);
      if (s.cluster)
        gauge(
          "nats_stream_leader_known",
          "1 when the stream's replica group has a leader",
          s.cluster.leader ? 1 : 0,
          sl,
        );
      if (s.mirror) sourceSamples("mirror", s.mirror, sl, gauge);
      for (const src of s.sources ?? []) sourceSamples("source", src, sl, gauge);
      for (const c of s.consumer_detail ?? []) {
        const cl = { ...sl, consumer: c.name };
        gauge("nats_consumer_num_pending", "Messages not yet delivered to the consumer", c.num_pending, cl);
        gauge("nats_consumer_num_ack_pending", "Messages delivered and not yet acknowledged", c.num_ack_pending, cl);
        gauge(
          "nats_consumer_num_redelivered",
          "Messages delivered more than once and not yet acknowledged",
          c.num_redelivered,
          cl,
        );
        gauge("nats_consumer_num_waiting", "Pull requests waiting", c.num_waiting, cl);
        gauge("nats_consumer_delivered_stream_seq", "Stream sequence last delivered", c.delivered.stream_seq, cl);
        gauge(
          "nats_consumer_ack_floor_stream_seq",
          "Stream sequence below which everything is acknowledged",
          c.ack_floor.stream_seq,
          cl,
        );
      }
    }
  }
}

/**
 * The samples of one scrape. `nats_up` is 1 exactly when `/varz` answered and parsed (the server is
 * reachable); `nats_exporter_endpoint_up{endpoint}` says which endpoints did; `nats_healthz_ok` is 1
 * when `/healthz` says `ok` (JetStream current), 0 when it answered otherwise, absent when it did not answer.
 */
export function natsMetrics(s: MonitorSnapshot): Sample[] {
  const out: Sample[] = [];
  const gauge: Add = (name, help, value, labels) =>
    out.push({ name, help, type: "gauge", value, ...(labels ? { labels } : {}) });
  const counter: Add = (name, help, value, labels) =>
    out.push({ name, help, type: "counter", value, ...(labels ? { labels } : {}) });
  gauge("nats_up", "1 when the server's monitoring port answered /varz with the expected JSON", s.varz ? 1 : 0);
  for (const e of ENDPOINTS)
    gauge(
      "nats_exporter_endpoint_up",
      "1 when the endpoint answered and parsed on this scrape",
      s.errors[e] === undefined ? 1 : 0,
      { endpoint: e },
    );
  if (s.healthz)
    gauge(
      "nats_healthz_ok",
      "1 when /healthz says ok (JetStream streams and consumers current)",
      s.healthz.status === "ok" ? 1 : 0,
    );
  if (s.varz) varzSamples(s.varz, gauge, counter);
  if (s.jsz && !s.jsz.disabled) jszSamples(s.jsz, s.varz?.server_name, gauge, counter);
  return out;
}
