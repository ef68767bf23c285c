// Tokens of another region's tasks, asked of their home (docs/regions.md, "Home region and the
// replicated projection"). A replica row knows its task completed but never holds the token (the
// solvers keep tokens out of EVENTS); without this, a client that reads through the other region
// (a one-URL client after a failover and failback) would be told `expired` for a task its home
// still holds a valid token for. The question goes over NATS (core request/reply, which crosses
// the regions' leafnode link like the mirrors do), is never stored, and is answered by the home's
// gateways only for the task's own client and while the token is valid.
import type { TaskRow } from "@pipeline/shared/db";
import type { Logger } from "@pipeline/shared/log";
import type { NatsConnection, Subscription } from "@pipeline/shared/nats";
import { tokenSubject } from "@pipeline/shared/subjects";
import { z } from "zod";
import type { TaskStore } from "./pg.ts";

/** How long a read waits for the home region before answering from the replica alone. */
export const HOME_TOKEN_TIMEOUT_MS = 1_000;

const TokenQuestion = z.object({ id: z.uuid(), owner: z.string().min(1).max(200) });
type TokenQuestion = z.infer<typeof TokenQuestion>;

const TokenAnswer = z.union([
  z.object({
    token: z.string().min(1),
    expiresAt: z.iso.datetime({ offset: true }).nullable(),
    userAgent: z.string().nullable(),
  }),
  z.object({ token: z.null() }),
]);
type TokenAnswer = z.infer<typeof TokenAnswer>;

/**
 * A read of a task whose result only its home holds, while the home does not answer: not
 * `expired` (final: the client would pay to solve it again) but "ask again shortly". The HTTP
 * faces answer 503 with Retry-After (the 2Captcha facade: CAPCHA_NOT_READY).
 */
export class HomeUnreachableError extends Error {
  constructor(readonly row: TaskRow) {
    super(`task ${row.id}: its result is held by region ${row.region}, which does not answer right now`);
    this.name = "HomeUnreachableError";
  }
}

/**
 * A completed row of another region, its validity not past: its home is asked for the token. The
 * home's token wins over one this region may hold itself (a task this region completed while cut
 * off, whose home then moved to the region that adopted it and was paid again: the home's result
 * is the task's one result).
 */
export function asksHome(row: TaskRow, region: string, now: Date): boolean {
  return (
    row.region !== region &&
    row.state === "completed" &&
    (row.tokenExpiresAt === null || row.tokenExpiresAt.getTime() > now.getTime())
  );
}

/** What the home answers for a question, from its own row (pure). */
export function answerOf(row: TaskRow | undefined, q: TokenQuestion, region: string, now: Date): TokenAnswer {
  if (!row || row.owner !== q.owner || row.region !== region || row.state !== "completed" || row.token === null)
    return { token: null };
  if (row.tokenExpiresAt !== null && row.tokenExpiresAt.getTime() <= now.getTime()) return { token: null };
  return { token: row.token, expiresAt: row.tokenExpiresAt?.toISOString() ?? null, userAgent: row.userAgent };
}

export interface HomeTokenOptions {
  nc: NatsConnection;
  /** This gateway's region. */
  region: string;
  store: Pick<TaskStore, "get">;
  log: Logger;
  now?: () => Date;
}

/** Answers the other regions' questions for this region's tasks (one queue group: any gateway of the region answers). */
export function serveHomeTokens(o: HomeTokenOptions): Subscription {
  const now = o.now ?? (() => new Date());
  return o.nc.subscribe(tokenSubject(o.region), {
    queue: "gateway",
    callback: (err, msg) => {
      if (err) return;
      void (async () => {
        let question: TokenQuestion;
        try {
          question = TokenQuestion.parse(msg.json());
        } catch {
          msg.respond(JSON.stringify({ token: null }));
          return;
        }
        const answer = answerOf(await o.store.get(question.id), question, o.region, now());
        msg.respond(JSON.stringify(answer));
      })().catch((e: Error) => o.log.warn({ err: e.message }, "home token: question not answered"));
    },
  });
}

/**
 * The store with other regions' completed rows carrying their home's token while it is valid
 * there; a home that says it has none (erased, expired) leaves the row as it is (`expired`,
 * TOKEN_UNAVAILABLE, or the token held here). A home that does not answer within
 * HOME_TOKEN_TIMEOUT_MS (cut off, down) while no token is here: `get` throws
 * HomeUnreachableError; `getMany` (the facade's bulk read) leaves the row as it is.
 */
export function withHomeTokens<S extends Pick<TaskStore, "get" | "getMany">>(
  store: S,
  o: Omit<HomeTokenOptions, "store"> & { timeoutMs?: number },
): S {
  const now = o.now ?? (() => new Date());
  /** The row with its home's token; undefined when the home did not answer and no token is here. */
  const fill = async (row: TaskRow): Promise<TaskRow | undefined> => {
    if (!asksHome(row, o.region, now())) return row;
    let answer: TokenAnswer;
    try {
      const reply = await o.nc.request(tokenSubject(row.region), JSON.stringify({ id: row.id, owner: row.owner }), {
        timeout: o.timeoutMs ?? HOME_TOKEN_TIMEOUT_MS,
      });
      answer = TokenAnswer.parse(reply.json());
    } catch (e) {
      o.log.warn({ task: row.id, home: row.region, err: (e as Error).message }, "home token: the home did not answer");
      return row.token === null ? undefined : row;
    }
    if (answer.token === null) return row;
    return {
      ...row,
      token: answer.token,
      tokenExpiresAt: answer.expiresAt === null ? null : new Date(answer.expiresAt),
      userAgent: answer.userAgent,
    };
  };
  return {
    ...store,
    get: async (id: string) => {
      const row = await store.get(id);
      if (!row) return row;
      const filled = await fill(row);
      if (!filled) throw new HomeUnreachableError(row);
      return filled;
    },
    getMany: async (ids: readonly string[]) =>
      Promise.all((await store.getMany(ids)).map(async (row) => (await fill(row)) ?? row)),
  };
}
