import { geetestAnswer, imageAnswer, recaptchaToken, TURNSTILE_USER_AGENT, turnstileToken } from "./answers.ts";
import type { EmulatorState } from "./emulator-state.ts";
import { capacityAt, delay, rolls, transportFault } from "./faults.ts";
import { fingerprintOf } from "./fingerprint.ts";
import { codeReply, okReply, replyStyleOf } from "./protocol-reply.ts";
import type { ProtocolParams } from "./request-params.ts";
import { latencyFor } from "./settings.ts";
import { type ValidSubmission, validateSubmission } from "./submission.ts";
import type { ProviderTask } from "./task-book.ts";

function issueAnswer(
  sub: ValidSubmission,
  id: string,
  params: Record<string, string>,
): Pick<ProviderTask, "answer" | "answerExtra"> {
  switch (sub.method) {
    case "userrecaptcha":
    case "userrecaptcha_v3":
      return { answer: recaptchaToken(id), answerExtra: {} };
    case "turnstile":
      return { answer: turnstileToken(id), answerExtra: { useragent: TURNSTILE_USER_AGENT } };
    case "geetest":
      return { answer: geetestAnswer(id, params.challenge ?? ""), answerExtra: {} };
    case "image":
      return { answer: imageAnswer(sub.image ?? new Uint8Array(0), params), answerExtra: {} };
  }
}

/**
 * Handles one in.php call. Order: slow-response delay, outage/500 page, forced code, key,
 * task validation, random error, balance, thread limit (under the capacity schedule's); then the task is accepted and
 * `OK|<id>` returned. Every call is counted exactly once, as accepted or rejected.
 */
export async function handleInPhp(state: EmulatorState, call: ProtocolParams): Promise<Response> {
  const { params } = call;
  const style = replyStyleOf(params);
  const faults = state.settings.faults;
  state.stats.called(params.key, state.now());
  await delay(faults.slowResponseMs);

  const reject = (code: string): Response => {
    state.stats.rejected();
    return codeReply(style, code);
  };

  const page = transportFault(faults, state.now(), state.random);
  if (page) {
    state.stats.rejected();
    return page;
  }
  if (faults.forceCode?.inPhp) return reject(faults.forceCode.inPhp);

  const keyError = state.accounts.rejectKey(params.key);
  if (keyError) return reject(keyError);
  const key = params.key!;

  const sub = validateSubmission(params, call.file, state.settings.maxImageBytes);
  if (!sub.ok) return reject(sub.code);

  if (rolls(faults.errorRate, state.random)) return reject(faults.errorCode ?? "ERROR_NO_SLOT_AVAILABLE");
  if (state.accounts.balanceUnits(key) < state.settings.priceUnits[sub.method]) return reject("ERROR_ZERO_BALANCE");
  const threads = Math.min(state.accounts.threads(key), capacityAt(faults.capacity, state.now()) ?? Infinity);
  if (state.tasks.inFlight(key) >= threads) return reject("ERROR_NO_SLOT_AVAILABLE");

  const now = state.now();
  const jitter =
    state.settings.latencyJitterMs > 0 ? Math.floor(state.random() * (state.settings.latencyJitterMs + 1)) : 0;
  const id = state.tasks.nextId();
  const fingerprint = fingerprintOf(sub.protocolMethod, sub.fingerprintParams);
  state.tasks.add({
    id,
    key,
    method: sub.method,
    fingerprint,
    submittedAt: now,
    readyAt: now + latencyFor(state.settings.latencyMs, sub.method) + jitter,
    unsolvable: rolls(faults.unsolvableRate, state.random),
    ...issueAnswer(sub, id, params),
  });
  state.stats.accepted(fingerprint, key, state.tasks.inFlight(key), now);
  return okReply(style, id);
}
