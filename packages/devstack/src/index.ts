export {
  findChromium,
  findPostgres,
  findPromtool,
  findSudo,
  MissingBinaryError,
  onPath,
  type PostgresBinaries,
} from "./binaries.ts";
export { type CommandResult, runCommand } from "./command.ts";
export {
  cloudInitCommand,
  debianPackages,
  debianSuite,
  debianToolsDir,
  findShellcheck,
  findSshd,
  type UnpackedPackages,
} from "./debian-tools.ts";
export {
  DevStack,
  devStackDatabaseUrl,
  devStackEnv,
  devStackFile,
  NATS_ROLES_FOR_DEV,
  PgCredentials,
  readDevStack,
  removeDevStack,
  waitForDevStack,
  writeDevStack,
  writePgCredentials,
} from "./dev-stack.ts";
export { freePort, portInUse, waitForPort } from "./free-port.ts";
export {
  cachedServer,
  debianMirror,
  type FetchedServer,
  type FoundServer,
  fetchDebianServer,
  findNatsServer,
  natsBinDir,
  natsServerVersion,
  withLock,
} from "./nats-binary.ts";
export { type NatsCluster, startNatsCluster } from "./nats-cluster.ts";
export {
  type CredentialsFile,
  type NatsCredentials,
  type NatsServerHandle,
  type NatsServerOptions,
  natsEnv,
  natsServerConfig,
  readNatsCredentials,
  startNatsServer,
} from "./nats-server.ts";
export {
  ADMIN_PASSWORD_FILE,
  type PostgresHandle,
  type PostgresOptions,
  redactPassword,
  startPostgres,
} from "./postgres.ts";
