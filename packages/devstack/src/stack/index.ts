export {
  gatewayEnv,
  type LeaseTiming,
  type RegionWiring,
  recoveryEnv,
  rolloutEnv,
  type StackProfile,
  solverEnv,
} from "./app-env.ts";
export {
  api,
  clientSecret,
  type E2eStack,
  type E2eStackOptions,
  startE2eStack,
  steadyLoad,
  submittedTwice,
  submitWindowsAtKill,
} from "./e2e.ts";
export { completedEventsCarryToken } from "./event-format.ts";
export { consoleLauncher } from "./launchers.ts";
export { type RegionServer, waitForLeases, waitForMirrors } from "./ready.ts";
export { type Relay, startRelay } from "./relay.ts";
export {
  type NatsSite,
  type OwnServerOptions,
  ownServers,
  type PortName,
  type ServerSource,
  type StackDatabase,
  testServers,
} from "./servers.ts";
export {
  type Launcher,
  type RegionPair,
  type RegionStack,
  type StackHandle,
  type StackOptions,
  startRegionPair,
  startStack,
} from "./stack.ts";
