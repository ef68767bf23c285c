export { isPeerConnectionError, survivePeerResets } from "./peer-errors.ts";
export { runService, type ServiceShell } from "./run-service.ts";
