// Who may do what on the NATS server: one user per app, with subject permissions derived from
// the regions the server carries. Pure: the server config (@pipeline/devstack) and the docs read it.
//
// The apps administer nothing (issue 34): no stream and no KV bucket is created, changed, sealed,
// purged or deleted by the gateway's or the solver's user, and no consumer outside the solver's
// lane consumers on TASKS. Streams, buckets and the notifier consumers are the administering
// side's (recovery, rollout, admin: provision.ts, before the apps start); an app only
// reads their info (STREAM.INFO) and waits for them at start (topology.ts, requireStreams).
import {
  bodySubjects,
  buckets,
  dlqSubjects,
  eventSubject,
  eventSubjects,
  hookEventSubject,
  isFinalEventKind,
  streams,
  taskSubjects,
  tokenSubject,
  tokenSubjects,
} from "../subjects.ts";
import { inboxPrefixOf } from "./connection.ts";
import { notifierHooksConsumerConfig } from "./topology.ts";

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

/**
 * The event kinds each app publishes (`events.<region>.<kind>`, and `.hook` for a final kind):
 * a user may publish no other. So a `completed` event (the one that carries a token into rows,
 * through a restore's replay or the other region's replicator) can only come from the solver's
 * user, an `accepted` one (a task's owner and params) only from the gateway's. `adopted` and any
 * other kind are recovery's (or admin's).
 */
export const EMITTED_EVENT_KINDS = {
  /** tasks/submit.ts, tasks/cancel.ts, tasks/redrive.ts. */
  gateway: ["accepted", "cancelled", "redriven"],
  /** worker/claim.ts, submit.ts, steps.ts; `breaker`: the fleet alert of service.ts. */
  solver: ["solving", "submitted", "retrying", "completed", "failed", "breaker"],
} as const satisfies Record<"gateway" | "solver", readonly string[]>;

/** Everything in the account: recovery and rollout administer streams, consumers and KV. */
const FULL: Permissions = { publish: { allow: [">"] }, subscribe: { allow: [">"] } };

/** The event subjects an app may publish on in one region. */
const eventPublish = (app: keyof typeof EMITTED_EVENT_KINDS, region: string) =>
  EMITTED_EVENT_KINDS[app].flatMap((k) =>
    isFinalEventKind(k) ? [eventSubject(region, k), hookEventSubject(region, k)] : [eventSubject(region, k)],
  );

/**
 * A KV bucket read (get, history, watch through an ordered consumer): its stream's info, message
 * gets, and consumers on it (reading only; a KV stream's consumer removes nothing). Never its
 * stream's create or update (`sealed`, limits): that is administration.
 */
const kvRead = (bucket: string) => {
  const stream = `KV_${bucket}`;
  return [
    `$JS.API.STREAM.INFO.${stream}`,
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

/** Reading a durable consumer the administering side made: its info, its messages, their acks. */
const pullFrom = (stream: string, consumer: string) => [
  `$JS.API.CONSUMER.INFO.${stream}.${consumer}`,
  `$JS.API.CONSUMER.MSG.NEXT.${stream}.${consumer}`,
  `$JS.ACK.${stream}.${consumer}.>`,
];

/**
 * What no app user may ever do, whatever its allow list says: administer a stream (a KV bucket is
 * one), the account or the servers.
 */
const ADMINISTRATION = [
  "$JS.API.STREAM.CREATE.>",
  "$JS.API.STREAM.UPDATE.>",
  "$JS.API.STREAM.DELETE.>",
  "$JS.API.STREAM.PURGE.>",
  "$JS.API.STREAM.MSG.DELETE.>",
  "$JS.API.STREAM.SNAPSHOT.>",
  "$JS.API.STREAM.RESTORE.>",
  "$JS.API.STREAM.PEER.>",
  "$JS.API.STREAM.LEADER.>",
  "$JS.API.STREAM.LIST",
  "$JS.API.STREAM.NAMES",
  "$JS.API.ACCOUNT.>",
  "$JS.API.META.>",
  "$JS.API.SERVER.>",
];

/** A region's queues and bodies, whose messages no app reads by get, and on which it makes no consumer (but the solver's lanes on TASKS). */
const noReadsNorConsumers = (region: string, o: { consumersOn: string[] }) => {
  const out: string[] = [];
  for (const s of [streams.tasks(region), streams.events(region), streams.dlq(region), streams.bodies(region)]) {
    out.push(`$JS.API.STREAM.MSG.GET.${s}`, `$JS.API.DIRECT.GET.${s}`, `$JS.API.DIRECT.GET.${s}.>`);
    if (o.consumersOn.includes(s)) continue;
    out.push(
      `$JS.API.CONSUMER.CREATE.${s}`,
      `$JS.API.CONSUMER.CREATE.${s}.>`,
      `$JS.API.CONSUMER.DURABLE.CREATE.${s}.>`,
      `$JS.API.CONSUMER.DELETE.${s}.>`,
    );
  }
  return out;
};

/**
 * The gateway publishes tasks, image bodies and its own event kinds, and reads the region's
 * lease view (the fence). It consumes nothing and reads no message of TASKS, EVENTS, DLQ or
 * BODIES: its long-polls are woken by a core subscription to `events.<region>.>`, which sees
 * events as they are published (an `accepted` event's params without its image bodies, which
 * are on BODIES only). It asks and answers `tokens.<region>` (a token of a task whose home is
 * another region, over the leafnode link; never stored).
 */
function gateway(regions: string[]): Permissions {
  // A token question goes to the task's home, which this server need not carry (each region's
  // server carries its own): any region's `tokens.*`. The answer is a publish to the asker's inbox.
  const pub = ["$JS.API.INFO", `${inboxPrefixOf("gateway")}.>`, tokenSubjects()];
  const sub = [`${inboxPrefixOf("gateway")}.>`];
  const deny = [...ADMINISTRATION, "$JS.ACK.>", "$KV.>"];
  for (const r of regions) {
    pub.push(taskSubjects(r), bodySubjects(r), ...eventPublish("gateway", r));
    for (const s of [streams.tasks(r), streams.events(r), streams.bodies(r)]) pub.push(`$JS.API.STREAM.INFO.${s}`);
    pub.push(...kvRead(buckets.region(r)));
    sub.push(eventSubjects(r), tokenSubject(r));
    deny.push(...noReadsNorConsumers(r, { consumersOn: [] }));
  }
  return { publish: { allow: pub, deny }, subscribe: { allow: sub } };
}

/**
 * The solver pulls TASKS through its version's lane consumers, which it creates and changes
 * itself (CONSUMER.CREATE on TASKS, RESET to rewind one that gained shards: shards/assignment.ts),
 * and reads EVENTS only through the notifier consumers the administering side made. It never
 * sees image bodies: nothing of BODIES is in its lists.
 */
function solver(regions: string[]): Permissions {
  const pub = ["$JS.API.INFO", "$JS.FC.>"];
  const deny = [...ADMINISTRATION];
  for (const r of regions) {
    const tasks = streams.tasks(r);
    const events = streams.events(r);
    // The reaper re-publishes a dead worker's tasks; dead letters go to DLQ.
    pub.push(taskSubjects(r), dlqSubjects(r), ...eventPublish("solver", r));
    for (const s of [tasks, events, streams.dlq(r)]) pub.push(`$JS.API.STREAM.INFO.${s}`);
    // (A consumer with several filters is created through DURABLE.CREATE by the client.)
    pub.push(
      `$JS.API.CONSUMER.CREATE.${tasks}.>`,
      `$JS.API.CONSUMER.DURABLE.CREATE.${tasks}.>`,
      `$JS.API.CONSUMER.INFO.${tasks}.>`,
      `$JS.API.CONSUMER.MSG.NEXT.${tasks}.>`,
      `$JS.ACK.${tasks}.>`,
    );
    // A lane consumer that gains shards is rewound to the oldest message left (shards/assignment.ts).
    pub.push(`$JS.API.CONSUMER.RESET.${tasks}.>`);
    pub.push(...pullFrom(events, notifierHooksConsumerConfig(r).durable_name));
    pub.push(...kvWrite(buckets.workers(r)), ...kvRead(buckets.config(r)), ...kvRead(buckets.region(r)));
    // The shard assignment: the first solver of a region writes it; the rollout service changes it.
    pub.push(...kvWrite(buckets.rollout(r)));
    // The config bucket is the operator's: a solver reads and watches it, never writes it.
    deny.push(`$KV.${buckets.config(r)}.>`, `$KV.${buckets.region(r)}.>`);
    deny.push(...noReadsNorConsumers(r, { consumersOn: [tasks] }), `$JS.API.CONSUMER.DELETE.${tasks}.>`);
  }
  return { publish: { allow: pub, deny }, subscribe: { allow: [`${inboxPrefixOf("solver")}.>`] } };
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
