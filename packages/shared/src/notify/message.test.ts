import { expect, test } from "bun:test";
import { sha256 } from "../sha256.ts";
import { consoleLink, dedupeKey, escapeMrkdwn, type Notification, webhookBody } from "./message.ts";

const n: Notification = {
  key: "rollback:v2-20261206120000",
  kind: "rollback",
  severity: "critical",
  region: "fsn1",
  title: "rollout v2 rolled back",
  text: "gate failed in fsn1 at 25%: task failure rate 9.0% vs stable 0.5% <p95>",
  path: "/console#rollout",
};

test("the body is Slack's incoming-webhook JSON: text with the link, blocks, and the machine fields apart", () => {
  const b = webhookBody(n, "https://console.example.net/console/", new Date("2026-12-06T03:00:00Z"));
  expect(b.text).toBe(
    ":rotating_light: [fsn1] rollout v2 rolled back\ngate failed in fsn1 at 25%: task failure rate 9.0% vs stable 0.5% &lt;p95&gt;\n<https://console.example.net/console#rollout|Open the console>",
  );
  expect(b.blocks[0]).toEqual({ type: "section", text: { type: "mrkdwn", text: b.text } });
  expect(b.pipeline).toEqual({
    key: n.key,
    kind: "rollback",
    severity: "critical",
    region: "fsn1",
    at: "2026-12-06T03:00:00.000Z",
    link: "https://console.example.net/console#rollout",
  });
});

test("without the console's address there is no link; the path defaults to the console's page", () => {
  expect(webhookBody(n, undefined, new Date(0)).text).not.toContain("Open the console");
  expect(consoleLink({}, "http://127.0.0.1:8090")).toBe("http://127.0.0.1:8090/console");
  expect(consoleLink({ path: "/console/timeline/x" }, "http://h/console")).toBe("http://h/console/timeline/x");
  expect(escapeMrkdwn("a & <b>")).toBe("a &amp; &lt;b&gt;");
});

test("a KV key is the event's key when it is one already; otherwise cleaned and made unique by its hash", () => {
  const h = (s: string) => sha256(s, "hex");
  expect(dedupeKey("dlq.fsn1.1200", h)).toBe("dlq.fsn1.1200");
  const a = dedupeKey("failover:hel1:7", h);
  const b = dedupeKey("failover_hel1_7", h);
  expect(a).not.toBe(b);
  expect(a).toMatch(/^[-/_=.a-zA-Z0-9]+$/);
  const long = dedupeKey(`x${"y".repeat(300)}`, h);
  expect(long.length).toBeLessThanOrEqual(183);
  expect(long).not.toBe(dedupeKey(`x${"y".repeat(299)}z`, h));
});
