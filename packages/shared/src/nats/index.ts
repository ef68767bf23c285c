export {
  connectionInboxPrefix,
  connectNats,
  inboxPrefixOf,
  isRetryablePublishError,
  type Msg,
  type NatsAuth,
  type NatsConnection,
  natsAuthFromEnv,
  type Subscription,
} from "./connection.ts";
export {
  EMITTED_EVENT_KINDS,
  NATS_ROLES,
  type NatsRole,
  type Permissions,
  rolePermissions,
  type SubjectRules,
} from "./permissions.ts";
export { createPubAckPublisher, PubAckError, PubAckTimeoutError, type Publisher } from "./pub-acks.ts";
export { publishScheduledTask, publishTaskMessage, publishWithRetry } from "./publish.ts";
export {
  assertStuck,
  bodiesMaxAgeFor,
  bodiesMirrorConfig,
  bodiesStreamConfig,
  DEFAULT_BODIES_MAX_AGE_MS,
  dlqStreamConfig,
  ensureConsumer,
  ensureLaneConsumers,
  ensureNotifierConsumer,
  ensureStream,
  ensureStreamPresent,
  ensureStreams,
  eventsMirrorConfig,
  eventsStreamConfig,
  isNotFound,
  type LaneConsumerOptions,
  laneConsumerConfig,
  notifierConsumerName,
  notifierHooksConsumerConfig,
  type RequireOptions,
  requireStreams,
  TOPOLOGY_WAIT_MS,
  TopologyError,
  TopologyMissingError,
  type TopologyOptions,
  tasksStreamConfig,
} from "./topology.ts";
export { unscheduleTask } from "./unschedule.ts";
export { MIN_NATS_SERVER, parseServerVersion, versionAtLeast } from "./version.ts";
