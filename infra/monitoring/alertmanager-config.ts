// alertmanager.yml: every alert to ONE webhook, in Slack's incoming-webhook JSON (slack_configs),
// which Slack, Mattermost and infra/monitoring/alert-receiver.ts all accept.

export interface AlertmanagerOptions {
  /** The webhook (ALERT_WEBHOOK_URL). Written into the file: keep that file 0640 root:prometheus. */
  webhookUrl?: string;
  /** Or a file holding it (`api_url_file`): the config then holds no secret. */
  webhookUrlFile?: string;
  /** How long the first alert of a group waits for others (Alertmanager's default is 30 s). */
  groupWait?: string;
  groupInterval?: string;
  repeatInterval?: string;
}

/** The alerts a host's loss also raises for what runs on it: HostDown inhibits them (same `host` label). */
export const INHIBITED_BY_HOST_DOWN = ["AppDown", "PostgresDown", "NatsDown", "ExporterDown"];

// A title the receiver can read the alert's name from: "[FIRING:2] AppDown".
const TITLE =
  '[{{ .Status | toUpper }}{{ if eq .Status "firing" }}:{{ .Alerts.Firing | len }}{{ end }}] {{ .CommonLabels.alertname }}';
const TEXT =
  "{{ range .Alerts }}{{ .Annotations.summary }} ({{ .Labels.severity }}{{ with .Labels.host }}; host {{ . }}{{ end }}{{ with .Labels.instance }}, {{ . }}{{ end }})\n{{ end }}";

/** alertmanager.yml as text. Throws unless exactly one of webhookUrl and webhookUrlFile is given. */
export function renderAlertmanagerConfig(o: AlertmanagerOptions): string {
  if (Boolean(o.webhookUrl) === Boolean(o.webhookUrlFile))
    throw new Error("give the alert webhook either as a URL (ALERT_WEBHOOK_URL) or as a file, one of the two");
  if (o.webhookUrl && !/^https?:\/\/[^\s]+$/.test(o.webhookUrl))
    throw new Error("ALERT_WEBHOOK_URL must be an http(s) URL");
  const config = {
    route: {
      receiver: "webhook",
      group_by: ["alertname", "region"],
      group_wait: o.groupWait ?? "10s",
      group_interval: o.groupInterval ?? "1m",
      repeat_interval: o.repeatInterval ?? "4h",
    },
    inhibit_rules: [
      {
        source_matchers: ["alertname = HostDown"],
        target_matchers: [`alertname =~ "${INHIBITED_BY_HOST_DOWN.join("|")}"`],
        equal: ["host"],
      },
    ],
    receivers: [
      {
        name: "webhook",
        slack_configs: [
          {
            ...(o.webhookUrl ? { api_url: o.webhookUrl } : { api_url_file: o.webhookUrlFile }),
            send_resolved: true,
            username: "captcha-pipeline alerts",
            title: TITLE,
            text: TEXT,
          },
        ],
      },
    ],
  };
  return `# Rendered by infra/monitoring/render.ts: every alert goes to one webhook (Slack's format).\n${Bun.YAML.stringify(config, null, 2)}\n`;
}
