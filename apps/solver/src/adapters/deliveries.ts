import { type Db, type DeliveryStatus, type TaskRow, tasks, webhookDeliveries } from "@pipeline/shared/db";
import { eq, placeholder } from "drizzle-orm";

/** A delivery a dispatcher holds the lease of. `token` names this claim: later writes are guarded by it. */
export interface ClaimedDelivery {
  deliveryId: string;
  taskId: string;
  state: string;
  owner: string;
  host: string;
  /** Attempts before this one. */
  attempts: number;
  createdAt: Date;
  token: string;
}

export interface ClaimOptions {
  /** At most this many rows (the dispatcher's free concurrency). */
  limit: number;
  /** In-flight deliveries (rows under a live lease, fleet-wide) per task owner, this one included. */
  tenantCap: number;
  /** The same per callback host (`host[:port]`). */
  hostCap: number;
  leaseMs: number;
  token: string;
}

/** What the notifier needs of a task to record its callback: not the whole row (its params). */
export type CallbackTarget = Pick<TaskRow, "id" | "state" | "owner" | "redrives" | "callbackUrl">;

export interface DeliveryStore {
  task(id: string): Promise<TaskRow | undefined>;
  callbackTarget(id: string): Promise<CallbackTarget | undefined>;
  /** Records a delivery, pending and due now, unless it exists (the event was seen before). */
  enqueue(d: { deliveryId: string; taskId: string; state: string; owner: string; host: string }): Promise<void>;
  /**
   * Leases due deliveries: pending, `next_attempt_at` passed, no live lease, and within both
   * in-flight caps. Tenants take turns (each one's earliest first), so one tenant's backlog
   * never holds another's delivery back while the tenant is at its cap.
   */
  claim(o: ClaimOptions): Promise<ClaimedDelivery[]>;
  /** The receiver answered 2xx: never sent again. */
  delivered(d: ClaimedDelivery, status: number): Promise<void>;
  /**
   * A failed attempt: one more attempt counted, due again `delayMs` from now, or `failed` when it
   * reaches `maxAttempts` or is older than `maxAgeMs`. Undefined when the lease was lost.
   */
  retry(
    d: ClaimedDelivery,
    o: { status: number | null; error: string; delayMs: number; maxAttempts: number; maxAgeMs: number },
  ): Promise<{ attempts: number; gaveUp: boolean } | undefined>;
  /** Ends a delivery without sending it (refused by the SSRF policy, superseded, or its task gone). */
  end(
    d: ClaimedDelivery,
    status: Extract<DeliveryStatus, "refused" | "superseded" | "failed">,
    error: string,
  ): Promise<void>;
  /** Pending deliveries fleet-wide, and how far behind the most overdue one is (seconds, 0 when none). */
  backlog(): Promise<{ pending: number; lagSeconds: number }>;
}

// pg_advisory_xact_lock key: claims run one at a time fleet-wide, so the caps hold exactly.
const CLAIM_LOCK = 0x77_68_6b_31; // "whk1"

export function createDeliveryStore(db: Db): DeliveryStore {
  const sql = db.$client;
  // Read for every final event of a task with a callback: built once (drizzle builds a query's SQL
  // from the schema on every call otherwise, ~0.2 ms of CPU).
  const taskById = db
    .select()
    .from(tasks)
    .where(eq(tasks.id, placeholder("id")))
    .prepare("notifier_task_by_id");
  const targetById = db
    .select({
      id: tasks.id,
      state: tasks.state,
      owner: tasks.owner,
      redrives: tasks.redrives,
      callbackUrl: tasks.callbackUrl,
    })
    .from(tasks)
    .where(eq(tasks.id, placeholder("id")))
    .prepare("notifier_callback_target");
  return {
    async task(id) {
      return (await taskById.execute({ id }))[0];
    },
    async callbackTarget(id) {
      return (await targetById.execute({ id }))[0];
    },
    async enqueue(d) {
      await db.insert(webhookDeliveries).values(d).onConflictDoNothing();
    },
    async claim(o) {
      const rows = await sql.begin(async (tx) => {
        await tx`select pg_advisory_xact_lock(${CLAIM_LOCK})`;
        return tx<
          Array<{
            delivery_id: string;
            task_id: string;
            state: string;
            owner: string;
            host: string;
            attempts: number;
            created_at: Date;
          }>
        >`
          with busy as (
            select owner, host from webhook_deliveries where status = 'pending' and lease_until > now()
          ),
          busy_owner as (select owner, count(*) as n from busy group by owner),
          busy_host as (select host, count(*) as n from busy group by host),
          due as (
            select d.delivery_id, d.owner, d.host, d.next_attempt_at,
                   row_number() over (partition by d.owner order by d.next_attempt_at, d.delivery_id) + coalesce(bo.n, 0) as owner_slot
            from webhook_deliveries d left join busy_owner bo on bo.owner = d.owner
            where d.status = 'pending' and d.delivered_at is null -- (a solver of the previous version marks only delivered_at)
              and d.next_attempt_at <= now() and (d.lease_until is null or d.lease_until <= now())
          ),
          within_tenant as (
            select due.*, row_number() over (partition by due.host order by due.owner_slot, due.next_attempt_at, due.delivery_id) + coalesce(bh.n, 0) as host_slot
            from due left join busy_host bh on bh.host = due.host
            where due.owner_slot <= ${o.tenantCap}
          ),
          pick as (
            select delivery_id from within_tenant where host_slot <= ${o.hostCap}
            order by owner_slot, next_attempt_at, delivery_id
            limit ${o.limit}
          )
          update webhook_deliveries d
          set lease_until = now() + (${o.leaseMs}::int * interval '1 millisecond'), lease_owner = ${o.token}
          from pick where d.delivery_id = pick.delivery_id
          returning d.delivery_id, d.task_id, d.state, d.owner, d.host, d.attempts, d.created_at`;
      });
      return rows.map((r) => ({
        deliveryId: r.delivery_id,
        taskId: r.task_id,
        state: r.state,
        owner: r.owner,
        host: r.host,
        attempts: r.attempts,
        createdAt: r.created_at,
        token: o.token,
      }));
    },
    async delivered(d, status) {
      // Not guarded by the lease: the receiver has it, whatever happened to the lease meanwhile.
      await sql`
        update webhook_deliveries
        set status = 'delivered', delivered_at = now(), last_status = ${status}, last_error = null, attempts = attempts + 1, lease_until = null, lease_owner = null, failed_at = null
        where delivery_id = ${d.deliveryId} and delivered_at is null`;
    },
    async retry(d, o) {
      const r = await sql<Array<{ attempts: number; status: string }>>`
        update webhook_deliveries
        set attempts = attempts + 1, last_status = ${o.status}, last_error = ${o.error.slice(0, 500)},
            status = case when attempts + 1 >= ${o.maxAttempts}::int or created_at <= now() - (${o.maxAgeMs}::float8 * interval '1 millisecond') then 'failed' else 'pending' end,
            failed_at = case when attempts + 1 >= ${o.maxAttempts}::int or created_at <= now() - (${o.maxAgeMs}::float8 * interval '1 millisecond') then now() end,
            next_attempt_at = now() + (${o.delayMs}::int * interval '1 millisecond'),
            lease_until = null, lease_owner = null
        where delivery_id = ${d.deliveryId} and lease_owner = ${d.token} and status = 'pending'
        returning attempts, status`;
      return r[0] ? { attempts: r[0].attempts, gaveUp: r[0].status === "failed" } : undefined;
    },
    async end(d, status, error) {
      await sql`
        update webhook_deliveries
        set status = ${status}, failed_at = now(), last_error = ${error.slice(0, 500)}, lease_until = null, lease_owner = null
        where delivery_id = ${d.deliveryId} and lease_owner = ${d.token} and status = 'pending'`;
    },
    async backlog() {
      const [r] = await sql<Array<{ pending: number; lag: number | null }>>`
        select count(*)::int as pending, extract(epoch from now() - min(next_attempt_at) filter (where next_attempt_at <= now()))::float8 as lag
        from webhook_deliveries where status = 'pending'`;
      return { pending: r?.pending ?? 0, lagSeconds: Math.max(0, r?.lag ?? 0) };
    },
  };
}
