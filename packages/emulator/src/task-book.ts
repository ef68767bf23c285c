import { randomInt } from "node:crypto";
import type { EmulatorMethod } from "./settings.ts";

/** One provider task as the emulator remembers it. The key is kept only to scope access. */
export interface ProviderTask {
  id: string;
  key: string;
  method: EmulatorMethod;
  fingerprint: string;
  submittedAt: number;
  readyAt: number;
  /** The answer issued for the task (also kept when the task ends unsolvable). */
  answer: string;
  /** Extra JSON fields of the answer (turnstile's `useragent`). */
  answerExtra: Record<string, string>;
  unsolvable: boolean;
  /** When res.php first handed out the final result; frees the thread slot. */
  answerReadAt?: number;
  report?: "bad" | "good";
  /** What the first read of the solved answer charged (units), and what a bad report gave back. */
  chargedUnits?: number;
  refundedUnits?: number;
}

/** A slot is given back this long after the answer was ready, even if nobody read it. */
export const SLOT_HOLD_AFTER_READY_MS = 30_000;
/** Tasks are forgotten this long after they were ready (then res.php says ERROR_WRONG_CAPTCHA_ID). */
export const TASK_RETENTION_MS = 30 * 60_000;
const PRUNE_EVERY_MS = 10_000;

/**
 * The provider's task table for one emulator: numeric ids, lookup, and the per-key count of
 * tasks "in flight" (submitted, answer not yet read, and not ready for more than 30 s).
 */
export class TaskBook {
  private readonly tasks = new Map<string, ProviderTask>();
  private readonly inFlightIds = new Map<string, Set<string>>();
  private nextNumber = 70_000_000_000 + randomInt(0, 9_000_000_000);
  private lastPrune = 0;

  constructor(private readonly now: () => number) {}

  /** A fresh numeric id, never handed out before by this book. */
  nextId(): string {
    this.nextNumber += 1;
    return String(this.nextNumber);
  }

  /** Records an accepted task; it occupies a slot of its key from now on. */
  add(task: ProviderTask): void {
    this.prune();
    this.tasks.set(task.id, task);
    let set = this.inFlightIds.get(task.key);
    if (!set) this.inFlightIds.set(task.key, (set = new Set()));
    set.add(task.id);
  }

  /** The task with this id, if the book still holds it. */
  get(id: string): ProviderTask | undefined {
    return this.tasks.get(id);
  }

  /** Marks the final result as read, which frees the slot. Returns true on the first read only. */
  markRead(task: ProviderTask): boolean {
    if (task.answerReadAt !== undefined) return false;
    task.answerReadAt = this.now();
    this.inFlightIds.get(task.key)?.delete(task.id);
    return true;
  }

  private holdsSlot(task: ProviderTask, now: number): boolean {
    return task.answerReadAt === undefined && now < task.readyAt + SLOT_HOLD_AFTER_READY_MS;
  }

  /** Tasks of `key` holding a slot right now. */
  inFlight(key: string): number {
    const set = this.inFlightIds.get(key);
    if (!set) return 0;
    const now = this.now();
    for (const id of set) {
      const task = this.tasks.get(id);
      if (!task || !this.holdsSlot(task, now)) set.delete(id);
    }
    return set.size;
  }

  /** In-flight counts of every key that has had a task. */
  inFlightByKey(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const key of this.inFlightIds.keys()) out[key] = this.inFlight(key);
    return out;
  }

  /** Forgets every task and frees every slot. */
  clear(): void {
    this.tasks.clear();
    this.inFlightIds.clear();
  }

  private prune(): void {
    const now = this.now();
    if (now - this.lastPrune < PRUNE_EVERY_MS) return;
    this.lastPrune = now;
    for (const [id, task] of this.tasks) {
      if (now > task.readyAt + TASK_RETENTION_MS) this.tasks.delete(id);
    }
  }
}
