// The figures of a drill on the fleet, from what its clients saw and what the provider was paid
// for; pure. The line is the one every drill of the project prints:
// `drill <name>: acknowledged N, lost L, failed F, extra paid submissions X (I in flight at the fault,
// U unexplained) ($C), double results D, RPO R, RTO T s`.

/** One task of the drill's load, as its client saw it through the load balancer. */
export interface TaskRecord {
  /** The idempotency key the client sent (every retry of the submission sends the same). */
  key: string;
  /** The task's id once a submission was acknowledged (202). */
  id?: string;
  acceptedAt?: number;
  /** When the client first saw a final status, and which. */
  finalAt?: number;
  status?: string;
  /** The error code of a `failed` or `expired` final view (TOKEN_UNAVAILABLE, TOKEN_EXPIRED, ...). */
  errorCode?: string;
  /** Where the final view came from (the LB's address). */
  finalVia?: string;
  /** The token of the first `completed` view the client saw. */
  token?: string;
  /** The token a last read after the drill returned (a different one is a double result). */
  tokenAfter?: string;
  /** Submission attempts not acknowledged (refused, timed out, connection failed). */
  refused: number;
}

export interface DrillFigures {
  acknowledged: number;
  /** Acknowledged tasks with no final status by the end (or unknown to the API): RPO. */
  lost: number;
  /** Acknowledged tasks that ended `failed` or `expired`. */
  failed: number;
  /** Provider submissions beyond one per task: the two kinds below together. */
  extraPaid: number;
  /**
   * A task paid twice because its process was killed between the provider's `OK|<id>` and the
   * checkpoint of that id: its first payment within CHECKPOINT_WINDOW_MS before the fault (or
   * while the fault was being injected), its second after the fault (the peer that took the task
   * over, its wait for a checkpoint over). Unavoidable: in.php has no idempotency key.
   */
  extraPaidInFlightAtFault: number;
  /** Every other extra payment (and all of them when the provider's payment times are unknown). */
  extraPaidUnexplained: number;
  doubleResults: number;
  /** From the fault until every task acknowledged before it had its final status (a region cut: those the survivor finished before the heal); undefined if one never did. */
  rtoS?: number;
  /** Submissions never acknowledged, after every retry (a client would have seen an error). */
  notAccepted: number;
  /** Attempts that were retried (each an error a client without retries would have seen). */
  refusedAttempts: number;
  /** A region cut: tasks acknowledged before it that ended at home after the heal (not resumable by the survivor). */
  afterHeal: number;
}

const FINAL = new Set(["completed", "failed", "cancelled", "expired"]);
export const isFinal = (status: string | undefined) => status !== undefined && FINAL.has(status);

/**
 * Submissions the provider accepted beyond one per task: per fingerprint (each drill task has its
 * own page URL, so its own fingerprint), what the emulator counted during the drill, less one.
 */
export function extraPaid(before: Record<string, number>, after: Record<string, number>): number {
  let extra = 0;
  for (const [f, n] of Object.entries(after)) {
    const during = n - (before[f] ?? 0);
    if (during > 1) extra += during - 1;
  }
  return extra;
}

/**
 * How long before a fault a payment can still be one its process had not checkpointed: the
 * solver writes the provider id to Postgres as soon as in.php answers `OK|<id>` (one
 * group-committed update, milliseconds; the emulator stamps the payment just before it answers).
 * 2 s leaves room for a stalled event loop or a slow commit on the fleet's shared cores; a first
 * payment older than that had its checkpoint written, and a second one for it is unexplained.
 */
export const CHECKPOINT_WINDOW_MS = 2000;

/**
 * The bound on extra payments in flight at a fault that kills solvers: how many submissions can
 * be between in.php's answer and their checkpoint at one instant. That span is under
 * SUBMIT_TO_CHECKPOINT_MS, and the drill's load reaches in.php at `perSecond` at most (over
 * every solver, the victim included): ceil(perSecond × 0.5 s), 2 at the drills' 4 tasks/s.
 */
export const SUBMIT_TO_CHECKPOINT_MS = 500;
export const paidInFlightBound = (perSecond: number) => Math.ceil((perSecond * SUBMIT_TO_CHECKPOINT_MS) / 1000);

/** What the provider was paid, before the drill and after it (from the emulator's /emulator/stats). */
export interface PaidSnapshots {
  before: Record<string, number>;
  after: Record<string, number>;
  /** After the drill: when each payment per fingerprint was made (epoch ms); absent from an older emulator. */
  paidAtAfter?: Record<string, number[]>;
}

/**
 * The extra payments split by mechanism. A fingerprint paid more than once during the drill
 * counts one extra as in flight at the fault when its first payment of the drill lies in
 * [faultAt − CHECKPOINT_WINDOW_MS, injectedAt] and its second at or after faultAt; every other
 * extra (a third payment, a first one long before the fault, no payment times) is unexplained.
 */
export function splitExtraPaid(
  paid: PaidSnapshots,
  fault: { at: number; injectedAt?: number },
): { inFlightAtFault: number; unexplained: number } {
  let inFlightAtFault = 0;
  let unexplained = 0;
  const injectedAt = Math.max(fault.at, fault.injectedAt ?? fault.at);
  for (const [f, n] of Object.entries(paid.after)) {
    const before = paid.before[f] ?? 0;
    const during = n - before;
    if (during <= 1) continue;
    const times = paid.paidAtAfter?.[f]?.slice(before);
    const [first, second] = times ?? [];
    const inFlight =
      times?.length === during &&
      first! >= fault.at - CHECKPOINT_WINDOW_MS &&
      first! <= injectedAt &&
      second! >= fault.at;
    if (inFlight) inFlightAtFault += 1;
    unexplained += during - 1 - (inFlight ? 1 : 0);
  }
  return { inFlightAtFault, unexplained };
}

export function drillFigures(
  records: TaskRecord[],
  faultAt: number,
  paid: PaidSnapshots,
  o: { healedAt?: number; injectedAt?: number } = {},
): DrillFigures {
  const acked = records.filter((r) => r.id);
  const lost = acked.filter((r) => !isFinal(r.status)).length;
  const failed = acked.filter((r) => r.status === "failed" || r.status === "expired").length;
  const doubleResults = acked.filter((r) => r.token && r.tokenAfter !== undefined && r.token !== r.tokenAfter).length;
  const before = acked.filter((r) => r.acceptedAt! <= faultAt);
  // A region cut (healedAt): the survivor finishes what it can resume (a provider id reached it);
  // the rest ends at home after the heal, as designed, and is counted apart, not in the RTO.
  const resumed = o.healedAt === undefined ? before : before.filter((r) => r.finalAt! <= o.healedAt!);
  const allFinal = before.every((r) => r.finalAt !== undefined);
  const split = splitExtraPaid(paid, { at: faultAt, injectedAt: o.injectedAt });
  const rtoS =
    allFinal && (resumed.length || !before.length)
      ? Math.max(0, ...resumed.map((r) => r.finalAt! - faultAt)) / 1000
      : undefined;
  return {
    acknowledged: acked.length,
    lost,
    failed,
    extraPaid: extraPaid(paid.before, paid.after),
    extraPaidInFlightAtFault: split.inFlightAtFault,
    extraPaidUnexplained: split.unexplained,
    doubleResults,
    rtoS,
    notAccepted: records.filter((r) => !r.id).length,
    refusedAttempts: records.reduce((a, r) => a + r.refused, 0),
    afterHeal: before.length - resumed.length,
  };
}

/** What a drill's task costs the operator at the provider: the list price of a turnstile solve (the drills' load), in micro-dollars. */
export const DRILL_TASK_PRICE_MICROS = 1450;

export function drillLine(name: string, f: DrillFigures, priceMicros = DRILL_TASK_PRICE_MICROS): string {
  const rto = f.rtoS === undefined ? "- (a task acknowledged before the fault never ended)" : `${f.rtoS.toFixed(1)} s`;
  const money = `$${((f.extraPaid * priceMicros) / 1_000_000).toFixed(5)}`;
  const kinds = `${f.extraPaidInFlightAtFault} in flight at the fault, ${f.extraPaidUnexplained} unexplained`;
  return `drill ${name}: acknowledged ${f.acknowledged}, lost ${f.lost}, failed ${f.failed}, extra paid submissions ${f.extraPaid} (${kinds}) (${money}), double results ${f.doubleResults}, RPO ${f.lost}, RTO ${rto}`;
}

/**
 * The drill's bar (docs: every fleet drill): nothing lost or failed, one result per task, RTO ≤
 * 60 s, and nothing paid twice but for the unavoidable: at most `maxInFlightAtFault` tasks paid
 * again because the fault killed their process between in.php's answer and the checkpoint (0
 * unless the drill kills solvers; then paidInFlightBound of its load), none unexplained.
 */
export function drillPassed(f: DrillFigures, o: { maxRtoS?: number; maxInFlightAtFault?: number } = {}): boolean {
  const maxRtoS = o.maxRtoS ?? 60;
  return (
    f.lost === 0 &&
    f.failed === 0 &&
    f.doubleResults === 0 &&
    f.extraPaidUnexplained === 0 &&
    f.extraPaidInFlightAtFault <= (o.maxInFlightAtFault ?? 0) &&
    f.notAccepted === 0 &&
    f.rtoS !== undefined &&
    f.rtoS <= maxRtoS
  );
}

/** The failed tasks by why (`expired TOKEN_EXPIRED via 10.77.2.5: 3`), for the drill's log. */
export function failureCauses(records: TaskRecord[]): string[] {
  const by = new Map<string, number>();
  for (const r of records.filter((x) => x.id && (x.status === "failed" || x.status === "expired"))) {
    const k = `${r.status} ${r.errorCode ?? "(no code)"}${r.finalVia ? ` via ${r.finalVia}` : ""}`;
    by.set(k, (by.get(k) ?? 0) + 1);
  }
  return [...by].map(([k, n]) => `${k}: ${n}`);
}
