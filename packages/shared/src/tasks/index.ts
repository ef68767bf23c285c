export { BodyMessage, BodyRef, BodyRefs, bodyDigest, checkBodies, type SplitBodies, splitBodies } from "./bodies.ts";
export { type Redriven, type RedrivePorts, type RequeuedRow, redriveFailedTask } from "./redrive.ts";
export { toTaskView } from "./view.ts";
