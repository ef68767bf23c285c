import { expect, test } from "bun:test";
import { parseArgs } from "./args.ts";

test("the command, its arguments, and --json and --also wherever they stand", () => {
  expect(parseArgs(["shift", "v2", "25%", "--json"])).toEqual({
    kind: "command",
    verb: "shift",
    rest: ["v2", "25%"],
    json: true,
    also: [],
  });
  expect(parseArgs(["--also", "v2,v3", "reconcile"])).toEqual({
    kind: "command",
    verb: "reconcile",
    rest: [],
    json: false,
    also: ["v2", "v3"],
  });
  expect(parseArgs(["start", "v2", "--steps", "10,100"])).toMatchObject({
    verb: "start",
    rest: ["v2", "--steps", "10,100"],
  });
});

test("no command prints the usage and fails; help prints it and succeeds; an unknown one is named", () => {
  expect(parseArgs([])).toEqual({ kind: "help", exitCode: 2 });
  expect(parseArgs(["--json"])).toEqual({ kind: "help", exitCode: 2 });
  expect(parseArgs(["help"])).toEqual({ kind: "help", exitCode: 0 });
  expect(parseArgs(["--help"])).toEqual({ kind: "help", exitCode: 0 });
  expect(parseArgs(["frobnicate"])).toEqual({ kind: "unknown", verb: "frobnicate" });
});
