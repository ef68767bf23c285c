// Progress of long operator commands (restore, rebuild-queue, snapshot, drills, bench) in the
// terminal: a bar with an estimate when the total is known, a counter with its rate when not.
// Drawn by cli-progress on stderr, and only when stderr is a terminal: nothing at all goes to a
// pipe, a log file or CI (stdout stays the command's result, `--json` included).
import { SingleBar } from "cli-progress";

export interface Progress {
  /** Sets the value (and the total, when it becomes known or changes). */
  update(value: number, total?: number): void;
  increment(n?: number): void;
  /** Ends the bar (leaves its last state on screen). */
  done(): void;
}

export const quietProgress: Progress = { update() {}, increment() {}, done() {} };

export interface ProgressOptions {
  /** What is counted ("tasks", "MB", "events"). */
  unit?: string;
  stream?: NodeJS.WriteStream;
  /** Default: the stream is a terminal and CI is not set (PROGRESS=0 turns it off, PROGRESS=1 on). */
  enabled?: boolean;
}

/** Whether a bar would be drawn on `stream` (a terminal, not CI; PROGRESS=0/1 overrides). */
export function progressEnabled(
  stream: NodeJS.WriteStream = process.stderr,
  env: Record<string, string | undefined> = process.env,
): boolean {
  if (env.PROGRESS === "0") return false;
  if (env.PROGRESS === "1") return true;
  return stream.isTTY === true && !env.CI;
}

/** The format: a bar and ETA with a total, a counter and elapsed time without. */
export function progressFormat(label: string, unit: string, total: number | undefined): string {
  return total && total > 0
    ? `${label} [{bar}] {percentage}% {value}/{total} ${unit} | ETA {eta_formatted}`
    : `${label} {value} ${unit} | {duration_formatted}`;
}

export function progressBar(label: string, total: number | undefined, o: ProgressOptions = {}): Progress {
  const stream = o.stream ?? process.stderr;
  if (!(o.enabled ?? progressEnabled(stream))) return quietProgress;
  const unit = o.unit ?? "";
  let known = total && total > 0 ? total : undefined;
  const make = () => {
    const b = new SingleBar({
      format: progressFormat(label, unit, known),
      stream,
      hideCursor: true,
      etaBuffer: 50,
      fps: 5,
      clearOnComplete: false,
      barsize: 30,
    });
    b.start(known ?? 0, 0);
    return b;
  };
  let bar = make();
  let stopped = false;
  return {
    update(value, t) {
      if (stopped) return;
      if (t !== undefined && t > 0 && t !== known) {
        // A counter that learns its total becomes a bar (a new line); a bar just gets the new total.
        if (known === undefined) {
          bar.stop();
          known = t;
          bar = make();
        } else {
          known = t;
          bar.setTotal(t);
        }
      }
      bar.update(value);
    },
    increment(n = 1) {
      if (!stopped) bar.increment(n);
    },
    done() {
      if (stopped) return;
      stopped = true;
      bar.stop();
    },
  };
}
