// topology.ts's replica rule, shared by ensureStream (streams) and kv/buckets.ts raiseBucketReplicas
// (buckets): what is asked for is kept when it is more, never less than what the server holds.
import { expect, test } from "bun:test";
import { replicasToKeep } from "./topology.ts";

test("replicas only ever go up: more asked is kept, fewer asked keeps the server's", () => {
  expect(replicasToKeep(3, 1)).toBe(3);
  expect(replicasToKeep(3, 3)).toBe(3);
  expect(replicasToKeep(1, 3)).toBe(3);
});
