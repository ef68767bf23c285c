// Who may do what on the NATS server: one user per app, with subject permissions derived from
// the regions the server carries. Pure: the server config (localstack) and the docs read it.
import { buckets } from "../runtime/kv.ts";
import { bodySubjects, dlqSubjects, eventSubjects, streams, taskSubjects } from "../subjects.ts";

/** One NATS user per app; `admin` is the operator (CLI, tests, drills). */
export const NATS_ROLES = ["admin", "gateway", "solver", "recovery", "rollout"] as const;
export type NatsRole = (typeof NATS_ROLES)[number];

export interface SubjectRules {
  allow: string[];
  deny?: string[];
}

export interface Permissions {
  publish: SubjectRules;
  subscribe: SubjectRules;
}

/** Everything in the account: recovery and rollout administer streams, consumers and KV. */
const FULL: Permissions = { publish: { allow: [">"] }, subscribe: { allow: [">"] } };

/** JetStream API subjects that manage one stream (create, update, read its config and messages). */
const streamApi = (stream: string) => [`$JS.API.STREAM.INFO.${stream}`, `$JS.API.STREAM.CREATE.${stream}`, `$JS.API.STREAM.UPDATE.${stream}`];

/** Pulling from a stream through durable or ordered consumers, and acknowledging what was pulled. */
const consumeApi = (stream: string) => [
  `$JS.API.CONSUMER.INFO.${stream}.>`,
  `$JS.API.CONSUMER.CREATE.${stream}`,
  `$JS.API.CONSUMER.CREATE.${stream}.>`,
  `$JS.API.CONSUMER.DURABLE.CREATE.${stream}.>`,
  `$JS.API.CONSUMER.MSG.NEXT.${stream}.>`,
  `$JS.ACK.${stream}.>`,
];

/** A KV bucket read (get, history, watch through an ordered consumer) but never written. */
const kvRead = (bucket: string) => {
  const stream = `KV_${bucket}`;
  return [
    ...streamApi(stream),
    `$JS.API.DIRECT.GET.${stream}`,
    `$JS.API.DIRECT.GET.${stream}.>`,
    `$JS.API.STREAM.MSG.GET.${stream}`,
    `$JS.API.CONSUMER.CREATE.${stream}`,
    `$JS.API.CONSUMER.CREATE.${stream}.>`,
    `$JS.API.CONSUMER.DELETE.${stream}.>`,
    `$JS.API.CONSUMER.INFO.${stream}.>`,
  ];
};

const kvWrite = (bucket: string) => [...kvRead(bucket), `$KV.${bucket}.>`];

/** What no app user may ever do, whatever its allow list says. */
const DESTRUCTIVE = ["$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.PURGE.>", "$JS.API.STREAM.MSG.DELETE.>", "$JS.API.STREAM.RESTORE.>", "$JS.API.ACCOUNT.>", "$JS.API.META.>", "$JS.API.SERVER.>"];

function gateway(regions: string[]): Permissions {
  const pub = ["$JS.API.INFO"];
  const sub = ["_INBOX.>"];
  for (const r of regions) {
    pub.push(taskSubjects(r), eventSubjects(r));
    for (const s of [streams.tasks(r), streams.events(r), streams.dlq(r)]) pub.push(...streamApi(s));
    pub.push(`$JS.API.STREAM.MSG.GET.${streams.events(r)}`, `$JS.API.DIRECT.GET.${streams.events(r)}.>`);
    pub.push(...kvRead(buckets.config(r)), ...kvRead(buckets.region(r)));
    sub.push(eventSubjects(r));
    // Image bodies (docs/security.md, "Image bodies"): published, and BODIES created when missing;
    // never read back (no message get, no consumer, no subscription) nor reconfigured.
    pub.push(bodySubjects(r), `$JS.API.STREAM.INFO.${streams.bodies(r)}`, `$JS.API.STREAM.CREATE.${streams.bodies(r)}`);
  }
  // The gateway publishes tasks; it never pulls them: no consumer on TASKS, no ack.
  return { publish: { allow: pub, deny: [...DESTRUCTIVE, "$JS.ACK.>", "$KV.>"] }, subscribe: { allow: sub } };
}

/** The solver (and its notifier) never sees image bodies: nothing of BODIES is in its lists. */
function solver(regions: string[]): Permissions {
  const pub = ["$JS.API.INFO", "$JS.FC.>"];
  const deny = [...DESTRUCTIVE];
  for (const r of regions) {
    pub.push(taskSubjects(r), eventSubjects(r), dlqSubjects(r));
    for (const s of [streams.tasks(r), streams.events(r), streams.dlq(r)]) pub.push(...streamApi(s));
    pub.push(...consumeApi(streams.tasks(r)), ...consumeApi(streams.events(r)));
    pub.push(`$JS.API.CONSUMER.DELETE.${streams.tasks(r)}.>`);
    // A lane consumer that gains shards is rewound to the oldest message left (shards.ts).
    pub.push(`$JS.API.CONSUMER.RESET.${streams.tasks(r)}.>`);
    pub.push(...kvWrite(buckets.workers(r)), ...kvRead(buckets.config(r)), ...kvRead(buckets.region(r)));
    // The shard assignment: the first solver of a region creates it; the rollout service changes it.
    pub.push(...kvWrite(buckets.rollout(r)));
    // The config bucket is the operator's: a solver reads and watches it, never writes it.
    deny.push(`$KV.${buckets.config(r)}.>`, `$KV.${buckets.region(r)}.>`);
  }
  return { publish: { allow: pub, deny }, subscribe: { allow: ["_INBOX.>"] } };
}

/** Subject permissions of a role on a server that carries `regions`. */
export function rolePermissions(role: NatsRole, regions: string[]): Permissions {
  switch (role) {
    case "gateway":
      return gateway(regions);
    case "solver":
      return solver(regions);
    case "admin":
    case "recovery":
    case "rollout":
      return FULL;
  }
}
