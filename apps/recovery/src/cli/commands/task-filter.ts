// The task filter options `recovery tasks`, `redrive-all` and `cancel-all` share: the CLI's option
// names mapped to the explorer's fields, and a parse error renamed back to the options typed.
import { UsageError } from "../../context.ts";

/** The CLI's option names for the query's fields, so an error names the option the operator typed. */
const OPTION: Record<string, string> = { solverVersion: "solver-version", from: "since", to: "until" };

interface FilterOptions {
  state?: string | undefined;
  client?: string | undefined;
  type?: string | undefined;
  priority?: string | undefined;
  region?: string | undefined;
  "solver-version"?: string | undefined;
  since?: string | undefined;
  until?: string | undefined;
  search?: string | undefined;
}

/** The explorer's filter fields from the command's options. */
export function filterInputOf(cmd: FilterOptions) {
  return {
    state: cmd.state,
    client: cmd.client,
    type: cmd.type,
    priority: cmd.priority,
    region: cmd.region,
    solverVersion: cmd["solver-version"],
    from: cmd.since,
    to: cmd.until,
    search: cmd.search,
  };
}

/** A parse error of those fields as a usage error naming the options (`--since: …`). */
export function filterUsageError(error: string): UsageError {
  let msg = error;
  for (const [field, option] of Object.entries(OPTION)) msg = msg.replaceAll(`${field}:`, `${option}:`);
  return new UsageError(`--${msg.replaceAll("; ", "\n--")}`);
}
