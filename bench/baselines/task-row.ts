import type postgres from "postgres";

/** What a baseline's queue message or job carries: the task itself (our messages carry only the id). */
export interface BaselineTask {
  id: string;
  type: string;
  params: Record<string, unknown>;
}

/**
 * The Postgres work every baseline does per task, in the project's `tasks` table: the row is
 * inserted (`queued`) and then updated to `completed`, two autocommit statements (two durable
 * commits), the least a worker that records what it did can write.
 */
export async function recordTask(sql: postgres.Sql, t: BaselineTask): Promise<void> {
  await sql`insert into tasks (id, owner, request_hash, region, type, priority, params, state)
            values (${t.id}, 'bench', 'baseline', 'baseline', ${t.type}, 'normal', ${sql.json(t.params as postgres.JSONValue)}, 'queued')
            on conflict (id) do nothing`;
  await sql`update tasks set state = 'completed', version = version + 1, token = ${`token-${t.id}`}, completed_at = now(), updated_at = now()
            where id = ${t.id} and state = 'queued'`;
}
