export { BodyMessage, BodyRef, BodyRefs, bodyDigest, checkBodies, type SplitBodies, splitBodies } from "./bodies.ts";
export { CANCELLABLE_STATES, cancelledEvent, cancelTaskRow } from "./cancel.ts";
export { type Redriven, type RedrivePorts, type RequeuedRow, redriveFailedTask } from "./redrive.ts";
export { toTaskView } from "./view.ts";
