import { toUnits } from "./money.ts";
import { DEFAULT_BALANCE, type KeyConfig } from "./settings.ts";

interface Account {
  threads: number;
  configuredBalance: number;
  balanceUnits: number;
}

/**
 * The provider's customer accounts: which keys exist, their thread limits and balances.
 * Keys are secrets: this class never prints them.
 */
export class Accounts {
  private readonly accounts = new Map<string, Account>();

  constructor(keys: Record<string, KeyConfig>) {
    this.configure(keys);
  }

  /**
   * Replaces the set of valid keys. A key that stays keeps what it has spent unless its
   * configured balance changes; removed keys stop working at once.
   */
  configure(keys: Record<string, KeyConfig>): void {
    for (const key of [...this.accounts.keys()]) if (!(key in keys)) this.accounts.delete(key);
    for (const [key, cfg] of Object.entries(keys)) {
      const configuredBalance = cfg.balance ?? DEFAULT_BALANCE;
      const prev = this.accounts.get(key);
      const keepSpent = prev && prev.configuredBalance === configuredBalance;
      this.accounts.set(key, {
        threads: cfg.threads,
        configuredBalance,
        balanceUnits: keepSpent ? prev.balanceUnits : toUnits(configuredBalance),
      });
    }
  }

  /** The error code for a key that cannot be used, or null when it is valid. */
  rejectKey(key: string | undefined): string | null {
    if (key === undefined || key === "") return "ERROR_KEY_DOES_NOT_EXIST";
    return this.accounts.has(key) ? null : "ERROR_WRONG_USER_KEY";
  }

  /** Thread limit of a valid key (0 for an unknown one). */
  threads(key: string): number {
    return this.accounts.get(key)?.threads ?? 0;
  }

  /** Remaining balance in units. */
  balanceUnits(key: string): number {
    return this.accounts.get(key)?.balanceUnits ?? 0;
  }

  /** Takes `units` off the key's balance (never below zero); returns the units taken. */
  charge(key: string, units: number): number {
    const a = this.accounts.get(key);
    if (!a) return 0;
    const taken = Math.min(a.balanceUnits, units);
    a.balanceUnits -= taken;
    return taken;
  }

  /** Gives `units` back to the key's balance (a refund). */
  credit(key: string, units: number): void {
    const a = this.accounts.get(key);
    if (a) a.balanceUnits += units;
  }

  /** Puts every balance back to its configured value. */
  refill(): void {
    for (const a of this.accounts.values()) a.balanceUnits = toUnits(a.configuredBalance);
  }
}
