import { describe, expect, test } from "bun:test";
import { renderExposition } from "./exposition.ts";
import { MonitorJsonError, parseMonitorJson } from "./monitor-json.ts";
import { natsMetrics } from "./nats-metrics.ts";

// Bodies as nats-server 2.15.1 answers them (trimmed of fields the exporter does not read).
const VARZ = {
  server_id: "NDUAY65LELZA6XF2",
  server_name: "fsn1-nats-1",
  version: "2.15.1",
  start: "2026-12-06T01:06:13.22726311Z",
  now: "2026-12-06T01:08:13.72726311Z",
  mem: 12083200,
  cpu: 1.5,
  connections: 4,
  total_connections: 9,
  routes: 2,
  remotes: 2,
  leafnodes: 1,
  subscriptions: 51,
  slow_consumers: 0,
  in_msgs: 120,
  out_msgs: 240,
  in_bytes: 4096,
  out_bytes: 8192,
  cluster: { name: "fsn1" },
  jetstream: { config: { max_memory: 100, max_storage: 1000, domain: "fsn1" } },
};
const JSZ = {
  memory: 0,
  storage: 123,
  streams: 1,
  consumers: 1,
  messages: 3,
  bytes: 123,
  api: { level: 5, total: 3, errors: 1 },
  config: { max_memory: 100, max_storage: 1000, domain: "fsn1" },
  meta_cluster: {
    name: "fsn1",
    leader: "fsn1-nats-2",
    cluster_size: 3,
    replicas: [
      { name: "fsn1-nats-2", current: true, active: 1000 },
      { name: "fsn1-nats-3", current: false, offline: true, active: 0 },
    ],
  },
  account_details: [
    {
      name: "PIPELINE",
      id: "PIPELINE",
      stream_detail: [
        {
          name: "TASKS_FSN1",
          cluster: { leader: "fsn1-nats-1" },
          state: { messages: 3, bytes: 123, first_seq: 1, last_seq: 3, consumer_count: 1, num_subjects: 1 },
          consumer_detail: [
            {
              stream_name: "TASKS_FSN1",
              name: "solver_v1_default",
              delivered: { consumer_seq: 2, stream_seq: 2 },
              ack_floor: { consumer_seq: 1, stream_seq: 1 },
              num_ack_pending: 1,
              num_redelivered: 0,
              num_waiting: 2,
              num_pending: 1,
            },
          ],
        },
        {
          name: "EVENTS_HEL1_MIRROR",
          state: { messages: 10, bytes: 1000, first_seq: 5, last_seq: 14, consumer_count: 0 },
          mirror: { name: "EVENTS_HEL1", lag: 7, active: 42_500_000_000 },
        },
      ],
    },
  ],
};

const text = (s: Parameters<typeof natsMetrics>[0]) => renderExposition(natsMetrics(s));

describe("nats monitoring JSON -> Prometheus samples", () => {
  test("a healthy server: up, its counters and gauges, each stream and consumer labelled by account, stream and consumer", () => {
    const out = text({
      varz: parseMonitorJson("varz", VARZ),
      jsz: parseMonitorJson("jsz", JSZ),
      healthz: parseMonitorJson("healthz", { status: "ok" }),
      errors: {},
    });
    for (const line of [
      "nats_up 1",
      'nats_exporter_endpoint_up{endpoint="jsz"} 1',
      "nats_healthz_ok 1",
      'nats_server_info{server_name="fsn1-nats-1",server_id="NDUAY65LELZA6XF2",version="2.15.1",cluster="fsn1",domain="fsn1"} 1',
      "nats_server_uptime_seconds 120.5",
      "nats_server_connections 4",
      "# TYPE nats_server_connections_total counter",
      "nats_server_connections_total 9",
      "nats_server_routes 2",
      "nats_server_slow_consumers_total 0",
      "nats_jetstream_enabled 1",
      "nats_jetstream_streams 1",
      "nats_jetstream_api_errors_total 1",
      "nats_jetstream_max_storage_bytes 1000",
      'nats_jetstream_meta_leader_known{cluster="fsn1"} 1',
      'nats_jetstream_meta_is_leader{cluster="fsn1"} 0',
      'nats_jetstream_meta_cluster_size{cluster="fsn1"} 3',
      'nats_jetstream_meta_peer_offline{cluster="fsn1",peer="fsn1-nats-3"} 1',
      'nats_stream_messages{account="PIPELINE",stream="TASKS_FSN1"} 3',
      'nats_stream_leader_known{account="PIPELINE",stream="TASKS_FSN1"} 1',
      'nats_consumer_num_pending{account="PIPELINE",stream="TASKS_FSN1",consumer="solver_v1_default"} 1',
      'nats_consumer_num_ack_pending{account="PIPELINE",stream="TASKS_FSN1",consumer="solver_v1_default"} 1',
      'nats_consumer_num_waiting{account="PIPELINE",stream="TASKS_FSN1",consumer="solver_v1_default"} 2',
      'nats_consumer_ack_floor_stream_seq{account="PIPELINE",stream="TASKS_FSN1",consumer="solver_v1_default"} 1',
      'nats_stream_mirror_lag{account="PIPELINE",stream="EVENTS_HEL1_MIRROR",origin="EVENTS_HEL1"} 7',
      'nats_stream_mirror_active_seconds{account="PIPELINE",stream="EVENTS_HEL1_MIRROR",origin="EVENTS_HEL1"} 42.5',
    ])
      expect(out.split("\n")).toContain(line);
    // One HELP and one TYPE per family, however many samples it has.
    expect(out.match(/^# TYPE nats_stream_messages /gm)).toHaveLength(1);
    expect(out.match(/^nats_stream_messages\{/gm)).toHaveLength(2);
  });

  test("a server that does not answer: nats_up 0, every endpoint down, nothing else", () => {
    const samples = natsMetrics({
      errors: { varz: "connect ECONNREFUSED", jsz: "connect ECONNREFUSED", healthz: "connect ECONNREFUSED" },
    });
    expect(samples.map((s) => `${s.name}${s.labels ? JSON.stringify(s.labels) : ""} ${s.value}`)).toEqual([
      "nats_up 0",
      'nats_exporter_endpoint_up{"endpoint":"varz"} 0',
      'nats_exporter_endpoint_up{"endpoint":"jsz"} 0',
      'nats_exporter_endpoint_up{"endpoint":"healthz"} 0',
    ]);
  });

  test("JetStream not current: up, but nats_healthz_ok 0", () => {
    const out = text({
      varz: parseMonitorJson("varz", VARZ),
      healthz: parseMonitorJson("healthz", {
        status: "unavailable",
        error: "JetStream has not established contact with a meta leader",
      }),
      errors: { jsz: "HTTP 500" },
    });
    expect(out).toContain("\nnats_healthz_ok 0\n");
    expect(out).toContain("nats_up 1\n");
    expect(out).toContain('nats_exporter_endpoint_up{endpoint="jsz"} 0');
    expect(out).not.toContain("nats_jetstream_streams");
  });

  test("JetStream off: nats_jetstream_enabled 0 and no JetStream figures", () => {
    const out = text({
      varz: parseMonitorJson("varz", { ...VARZ, jetstream: {} }),
      jsz: parseMonitorJson("jsz", { ...JSZ, disabled: true }),
      errors: {},
    });
    expect(out).toContain("nats_jetstream_enabled 0\n");
    expect(out).not.toContain("nats_jetstream_streams");
  });

  test("a mirror that never heard from its origin has a lag and no age", () => {
    const jsz = {
      ...JSZ,
      account_details: [
        {
          name: "A",
          stream_detail: [{ ...JSZ.account_details[0]!.stream_detail[1]!, mirror: { name: "O", lag: 0, active: -1 } }],
        },
      ],
    };
    const out = text({ jsz: parseMonitorJson("jsz", jsz), errors: {} });
    expect(out).toContain('nats_stream_mirror_lag{account="A",stream="EVENTS_HEL1_MIRROR",origin="O"} 0');
    expect(out).not.toContain("nats_stream_mirror_active_seconds");
  });
});

describe("bad input names the field at fault", () => {
  test("a count of the wrong type deep in /jsz", () => {
    const bad = structuredClone(JSZ) as {
      account_details: Array<{ stream_detail: Array<{ state: Record<string, unknown> }> }>;
    };
    bad.account_details[0]!.stream_detail[0]!.state.messages = "3";
    expect(() => parseMonitorJson("jsz", bad)).toThrow(MonitorJsonError);
    expect(() => parseMonitorJson("jsz", bad)).toThrow(
      /^jsz: account_details\.0\.stream_detail\.0\.state\.messages: .*expected number/,
    );
  });

  test("a field missing from /varz, and a negative count", () => {
    const { connections: _, ...missing } = VARZ;
    expect(() => parseMonitorJson("varz", missing)).toThrow(/^varz: connections: /);
    expect(() => parseMonitorJson("varz", { ...VARZ, in_msgs: -1 })).toThrow(/^varz: in_msgs: /);
  });

  test("not an object at all", () => {
    expect(() => parseMonitorJson("healthz", "ok")).toThrow(/^healthz: \(root\): /);
  });
});

describe("the text format", () => {
  test("label values are escaped; odd values are spelled as Prometheus reads them", () => {
    const out = renderExposition([
      { name: "x", help: "h", type: "gauge", value: Number.NaN, labels: { a: 'q"b\\n\nx' } },
      { name: "y", help: "h", type: "gauge", value: Number.POSITIVE_INFINITY },
    ]);
    expect(out).toBe('# HELP x h\n# TYPE x gauge\nx{a="q\\"b\\\\n\\nx"} NaN\n# HELP y h\n# TYPE y gauge\ny +Inf\n');
  });

  test("a metric or label name Prometheus would refuse is refused", () => {
    expect(() => renderExposition([{ name: "nats-up", help: "h", type: "gauge", value: 1 }])).toThrow(
      /invalid metric name/,
    );
    expect(() => renderExposition([{ name: "n", help: "h", type: "gauge", value: 1, labels: { "a-b": "x" } }])).toThrow(
      /invalid label name/,
    );
  });
});
