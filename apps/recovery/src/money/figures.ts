// What the money checks read from Postgres: the newest balance sample and the last hour's net
// spend per provider account, the ends of a reconciliation window, the spend today and over 30
// days. Time comparisons stay in SQL (microseconds, one clock: the database's).
import type postgres from "postgres";
import type { AccountFigures } from "./forecast.ts";
import type { ReconcileInput } from "./reconcile.ts";

const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));

/**
 * Per account with a sample in the last 7 days or ledger entries in the last hour: its newest
 * sample and the ledger's net over the last hour.
 */
export async function readAccountFigures(sql: postgres.Sql): Promise<AccountFigures[]> {
  const rows = await sql<{ provider: string; balance: string | null; at: string | null; spent: string }[]>`
    with newest as (
      select distinct on (provider) provider, balance_micros, sampled_at from provider_balances
      where sampled_at > now() - interval '7 days' order by provider, sampled_at desc
    ), spend as (
      select provider, sum(amount_micros) as net from ledger_all where created_at > now() - interval '1 hour' group by provider
    )
    select coalesce(n.provider, s.provider) as provider, n.balance_micros::text as balance,
      (extract(epoch from n.sampled_at) * 1000)::bigint::text as at, coalesce(s.net, 0)::text as spent
    from newest n full join spend s on s.provider = n.provider
    order by 1`;
  return rows.map((r) => ({
    provider: r.provider,
    balanceMicros: num(r.balance),
    sampledAt: num(r.at),
    spentLastHourMicros: Number(r.spent),
  }));
}

/**
 * The reconciliation inputs over the last `hours`, per account with a sample or a ledger entry in
 * it: the sample at or before the window's start (else the first in it), the newest sample, and
 * the ledger's net booked after the first and up to the last (the whole window without two samples).
 */
export async function readReconcileInputs(sql: postgres.Sql, hours: number): Promise<ReconcileInput[]> {
  const span = `${hours} hours`;
  const accounts = await sql<{ provider: string }[]>`
    select provider from provider_balances where sampled_at > now() - ${span}::interval
    union select provider from ledger_all where created_at > now() - ${span}::interval order by 1`;
  const out: ReconcileInput[] = [];
  for (const { provider } of accounts) {
    const [r] = await sql<
      { fb: string | null; fat: string | null; lb: string | null; lat: string | null; net: string }[]
    >`
      with f as (
        select balance_micros, sampled_at from (
          (select balance_micros, sampled_at, 0 as pri from provider_balances
            where provider = ${provider} and sampled_at <= now() - ${span}::interval order by sampled_at desc limit 1)
          union all
          (select balance_micros, sampled_at, 1 as pri from provider_balances
            where provider = ${provider} and sampled_at > now() - ${span}::interval order by sampled_at limit 1)
        ) c order by pri limit 1
      ), l as (
        select balance_micros, sampled_at from provider_balances where provider = ${provider} order by sampled_at desc limit 1
      )
      select f.balance_micros::text as fb, (extract(epoch from f.sampled_at) * 1000)::bigint::text as fat,
        l.balance_micros::text as lb, (extract(epoch from l.sampled_at) * 1000)::bigint::text as lat,
        (select coalesce(sum(amount_micros), 0) from ledger_all where provider = ${provider}
          and created_at > case when f.sampled_at < l.sampled_at then f.sampled_at else now() - ${span}::interval end
          and created_at <= case when f.sampled_at < l.sampled_at then l.sampled_at else now() end)::text as net
      from (select 1) one left join f on true left join l on true`;
    const sample = (b: string | null, at: string | null) =>
      b === null || at === null ? null : { balanceMicros: Number(b), at: Number(at) };
    out.push({
      provider,
      first: sample(r!.fb, r!.fat),
      last: sample(r!.lb, r!.lat),
      ledgerNetMicros: Number(r!.net),
    });
  }
  return out;
}

/** The ledger's spend over a period: charged, refunded (positive), net, in micro-dollars. */
export interface Spend {
  chargedMicros: number;
  refundedMicros: number;
  netMicros: number;
}

/** Spend today (since 00:00 UTC) and over the last 30 days, every account and client together. */
export async function readSpend(sql: postgres.Sql): Promise<{ today: Spend; last30Days: Spend }> {
  const [r] = await sql<Record<string, string>[]>`
    select
      coalesce(sum(amount_micros) filter (where kind = 'charge' and created_at >= date_trunc('day', now() at time zone 'utc') at time zone 'utc'), 0)::text as tc,
      coalesce(-sum(amount_micros) filter (where kind = 'refund' and created_at >= date_trunc('day', now() at time zone 'utc') at time zone 'utc'), 0)::text as tr,
      coalesce(sum(amount_micros) filter (where kind = 'charge'), 0)::text as mc,
      coalesce(-sum(amount_micros) filter (where kind = 'refund'), 0)::text as mr
    from ledger_all where created_at > now() - interval '30 days'`;
  const spend = (c: string, rf: string): Spend => ({
    chargedMicros: Number(c),
    refundedMicros: Number(rf),
    netMicros: Number(c) - Number(rf),
  });
  return { today: spend(r!.tc!, r!.tr!), last30Days: spend(r!.mc!, r!.mr!) };
}
