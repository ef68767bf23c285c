import { expect, test } from "bun:test";
import { requeueMessage } from "./message.ts";
import { fairShareView } from "./record.ts";

const view = fairShareView({
  groups: { team: { weight: 3, clients: ["0123456789abcdef"] } },
  defaultWeight: 1,
  by: "test",
  at: "2026-12-07T00:00:00.000Z",
});
const row = (owner: string) => ({
  id: "6f1c1c38-4f7e-4c55-9d59-5d3d3f3a0b11",
  type: "turnstile",
  priority: "high",
  owner,
});

test("a row queued again carries its owner's group; a client in no group, or no record, none", () => {
  expect(requeueMessage(row("0123456789abcdef"), view.groupOf)).toEqual({
    id: row("").id,
    type: "turnstile",
    priority: "high",
    group: "team",
  });
  expect(requeueMessage(row("fedcba9876543210"), view.groupOf)).toEqual({
    id: row("").id,
    type: "turnstile",
    priority: "high",
  });
  expect(requeueMessage(row("0123456789abcdef"))).toEqual({ id: row("").id, type: "turnstile", priority: "high" });
});
