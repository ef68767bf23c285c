// The balance samples in Postgres (`provider_balances`): one solver of a region at a time takes
// the turn to sample (a transaction-scoped advisory lock), and only when the newest sample of the
// account in this region is older than the poll interval.
import type postgres from "postgres";

export interface BalanceSample {
  provider: string;
  keyRef: string;
  region: string;
  balanceMicros: number;
}

export interface BalanceStore {
  /**
   * Runs `read` (the provider call) only if this caller holds the account's turn in `region` and
   * its newest sample is older than `everyMs`, then stores what it returned (undefined: nothing).
   * The turn is held until the sample is stored, so the fleet asks the provider at most once per
   * `everyMs` per region. Returns whether a sample was stored.
   */
  /** The newest sample of each key reference in `region` (what routing compares with the floor). */
  latest(region: string): Promise<Map<string, number>>;
  sampleIfDue(
    turn: { provider: string; keyRef: string; region: string; everyMs: number },
    read: () => Promise<number | undefined>,
  ): Promise<boolean>;
}

export function createBalanceStore(sql: postgres.Sql): BalanceStore {
  return {
    async latest(region) {
      const rows = await sql<{ key_ref: string; micros: string }[]>`
        select distinct on (key_ref) key_ref, balance_micros::text as micros
        from provider_balances where region = ${region} order by key_ref, sampled_at desc`;
      return new Map(rows.map((r) => [r.key_ref, Number(r.micros)]));
    },
    async sampleIfDue(t, read) {
      return await sql.begin(async (tx) => {
        const [lock] = await tx<{ held: boolean }[]>`
          select pg_try_advisory_xact_lock(hashtextextended(${`provider_balances:${t.provider}:${t.region}`}, 0)) as held`;
        if (!lock?.held) return false;
        const [fresh] = await tx<{ n: number }[]>`
          select count(*)::int as n from (select 1 from provider_balances
            where provider = ${t.provider} and region = ${t.region}
              and sampled_at > now() - ${`${t.everyMs} milliseconds`}::interval limit 1) s`;
        if ((fresh?.n ?? 0) > 0) return false;
        const micros = await read();
        if (micros === undefined) return false;
        // clock_timestamp(): when the provider answered, not when the turn was taken.
        await tx`insert into provider_balances (provider, key_ref, region, balance_micros, sampled_at)
          values (${t.provider}, ${t.keyRef}, ${t.region}, ${micros}, clock_timestamp())`;
        return true;
      });
    },
  };
}
