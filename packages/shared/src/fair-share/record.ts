// The region's fair-share groups (weighted fair share of the provider plan among clients while it is
// saturated: docs/fair-share.md). One record in the region's own bucket (`region_<region>`, key
// `fair_share`), written by the operator's side (`recovery fair-share set`), read by the gateways (a
// client's group decides its tasks' subject) and the solvers (a lane consumer per group, served in
// proportion to the weights). Pure: parsing and the lookups; read.ts reads it from NATS.
import { z } from "zod";

/** The KV key of the record in the region bucket. */
export const FAIR_SHARE_KEY = "fair_share";

/** A group's name: it is part of a subject and of a consumer's name. */
export const GroupName = z
  .string()
  .regex(/^[a-z0-9]{1,16}$/, "1-16 lower-case letters or digits (it goes into subjects and consumer names)");

/** A client id as `GET /v1/usage` shows it (32 hex characters with API_KEY_PEPPER, 16 without). */
const ClientId = z
  .string()
  .regex(/^(?:[0-9a-f]{16}|[0-9a-f]{32})$/, "must be a client id (32 hex characters, or 16 for an unpeppered id)");

export const FairShareGroup = z
  .object({
    /** Share of the plan while it is saturated, relative to the other groups with work. */
    weight: z.number().int().min(1).max(1000),
    /** The clients whose tasks belong to the group. */
    clients: z.array(ClientId).min(1).max(10_000),
  })
  .strict();

export const FairShare = z
  .object({
    groups: z.record(GroupName, FairShareGroup),
    /** The weight of every client in no group (they share the lanes' own subjects). */
    defaultWeight: z.number().int().min(1).max(1000).default(1),
    by: z.string().min(1).max(128),
    at: z.iso.datetime(),
  })
  .strict()
  .superRefine((r, ctx) => {
    const names = Object.keys(r.groups);
    if (names.length > 16) ctx.addIssue({ code: "custom", path: ["groups"], message: "at most 16 groups" });
    const seen = new Map<string, string>();
    for (const [name, g] of Object.entries(r.groups))
      for (const [i, c] of g.clients.entries()) {
        const other = seen.get(c);
        if (other)
          ctx.addIssue({
            code: "custom",
            path: ["groups", name, "clients", i],
            message: `client ${c} is already in group ${other}: a client belongs to one group`,
          });
        seen.set(c, name);
      }
  });
export type FairShare = z.infer<typeof FairShare>;

/** The record's bytes parsed: the record, or why it is refused (naming the field). */
export function parseFairShare(text: string): { ok: true; record: FairShare } | { ok: false; error: string } {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return { ok: false, error: `${FAIR_SHARE_KEY}: not JSON` };
  }
  const r = FairShare.safeParse(doc);
  if (!r.success)
    return {
      ok: false,
      error: `${FAIR_SHARE_KEY}: ${r.error.issues.map((i) => `${i.path.join(".") || "record"}: ${i.message}`).join("; ")}`,
    };
  return { ok: true, record: r.data };
}

/** Lookups the gateway and the solver make on a record (none: every client in the default group). */
export interface FairShareView {
  /** The group of a client id, or undefined (the lane's own subjects). */
  groupOf(clientId: string): string | undefined;
  /** The weight of a group (undefined: the default group). */
  weightOf(group: string | undefined): number;
  /** The groups, sorted by name. */
  groups(): string[];
}

export function fairShareView(r: FairShare | null | undefined): FairShareView {
  const byClient = new Map<string, string>();
  for (const [name, g] of Object.entries(r?.groups ?? {})) for (const c of g.clients) byClient.set(c, name);
  const names = Object.keys(r?.groups ?? {}).sort();
  return {
    groupOf: (c) => byClient.get(c),
    weightOf: (g) => (g === undefined ? (r?.defaultWeight ?? 1) : (r?.groups[g]?.weight ?? r?.defaultWeight ?? 1)),
    groups: () => names,
  };
}
