/**
 * What the handler decided about a message; one adapter applies it (river's JobSnooze/JobCancel).
 * `ack`: done (or nothing to do); `nak`: deliver again after `delayMs`; `term`: never again.
 */
export type Outcome =
  | { kind: "ack"; reason: string }
  | { kind: "nak"; delayMs: number; reason: string }
  | { kind: "term"; reason: string };

export const ack = (reason: string): Outcome => ({ kind: "ack", reason });
export const nak = (delayMs: number, reason: string): Outcome => ({
  kind: "nak",
  delayMs: Math.max(0, Math.round(delayMs)),
  reason,
});
export const term = (reason: string): Outcome => ({ kind: "term", reason });
