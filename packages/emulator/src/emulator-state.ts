import type { Accounts } from "./accounts.ts";
import type { BooksRecorder } from "./books.ts";
import type { ResolvedSettings } from "./settings.ts";
import type { StatsRecorder } from "./stats.ts";
import type { TaskBook } from "./task-book.ts";

/** Everything one emulator instance owns; handed to the handlers, never a module global. */
export interface EmulatorState {
  /** Current settings; replaced as a whole by configure(). */
  settings: ResolvedSettings;
  accounts: Accounts;
  /** What was charged and refunded, per key. */
  books: BooksRecorder;
  tasks: TaskBook;
  stats: StatsRecorder;
  now: () => number;
  random: () => number;
}
