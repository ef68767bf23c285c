import { JetStreamApiError, type JetStreamClient, type JetStreamManager, type MsgRequest } from "@nats-io/jetstream";
import { type GroupOf, requeueMessage } from "@pipeline/shared/fair-share";
import { publishTaskMessage } from "@pipeline/shared/nats";
import { streams, taskSubjects } from "@pipeline/shared/subjects";

export interface StreamScan {
  /** Task ids that have at least one message in TASKS (waiting or delivered and not yet acked). */
  ids: Set<string>;
  /** False when the TASKS stream does not exist. */
  exists: boolean;
  messages: number;
  ms: number;
}

function isStreamNotFound(err: unknown): boolean {
  return err instanceof JetStreamApiError && err.code === 10059;
}

/**
 * Lists the task ids held by TASKS_<REGION>. A WorkQueue stream cannot be looked up by message
 * id, and no extra consumer may be put on it (its subjects belong to the lane consumers), so
 * this walks the stream with `STREAM.MSG.GET next_by_subj`: one request per message held, which
 * a WorkQueue keeps small (acked messages are gone). Messages being delivered right now are
 * still held, so a task in flight is seen.
 */
export async function scanTasksStream(jsm: JetStreamManager, region: string): Promise<StreamScan> {
  const started = Date.now();
  const name = streams.tasks(region);
  let info;
  try {
    info = await jsm.streams.info(name);
  } catch (err) {
    if (isStreamNotFound(err)) return { ids: new Set(), exists: false, messages: 0, ms: Date.now() - started };
    throw err;
  }
  const ids = new Set<string>();
  let messages = 0;
  if (info.state.messages > 0) {
    let seq = info.state.first_seq;
    // Bounded by the last sequence at the start: a message published during the walk belongs to
    // whoever published it, not to this scan.
    const last = info.state.last_seq;
    while (seq <= last) {
      const m = await jsm.streams.getMessage(name, {
        seq,
        next_by_subj: taskSubjects(region),
      } as unknown as MsgRequest);
      if (!m || m.seq > last) break;
      messages++;
      try {
        const id = (m.json() as { id?: unknown }).id;
        if (typeof id === "string") ids.add(id);
      } catch {
        // An unparseable message belongs to no task; the solver terminates it.
      }
      seq = m.seq + 1;
    }
  }
  return { ids, exists: true, messages, ms: Date.now() - started };
}

export interface RepublishRow {
  id: string;
  type: string;
  priority: string;
  /** The client id: its fair-share group decides the message's subjects. */
  owner: string;
  version: number;
}

/**
 * Publishes a task message with a fresh `Nats-Msg-Id` (`<id>:<reason>:<version>`): the task id
 * itself may still sit in the 10-minute duplicate window and would be dropped. The same
 * (reason, version) twice is deduplicated by JetStream, which makes a repeated run harmless.
 * Returns true when JetStream stored a new message. With `groupOf` (the fair-share groups in use)
 * the message goes on the owner's group's subjects, as the gateway put it.
 */
export async function republishTask(
  js: JetStreamClient,
  region: string,
  row: RepublishRow,
  reason: "sweep" | "rebuild" | "adopt",
  deadlineMs: number,
  groupOf?: GroupOf,
): Promise<boolean> {
  const msg = requeueMessage(row, groupOf);
  const ack = await publishTaskMessage(js, region, msg, `${row.id}:${reason}:${row.version}`, deadlineMs);
  return !ack.duplicate;
}
