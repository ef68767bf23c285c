// The end-to-end tests' stack and helpers live in @pipeline/devstack/stack (e2e.ts), beside the one
// stack builder; the tests of an app's internals beside the app use them too.
export {
  api,
  clientSecret,
  type E2eStack as Stack,
  type E2eStackOptions as StackOptions,
  startE2eStack as startStack,
  steadyLoad,
  submittedTwice,
  submitWindowsAtKill,
} from "@pipeline/devstack/stack";
export { PROVIDER_KEY, type Proc, ROOT, spawnApp, WEBHOOK_SECRET } from "@pipeline/devstack/testing";
