export { classifyError, type ErrorClass, isTemporaryBlock, type ProviderProfile } from "./classify.ts";
export { balanceMicros, formatMicros, LIST_PRICE_MICROS, MICROS_PER_DOLLAR, priceMicros } from "./money.ts";
export { toProviderParams } from "./params.ts";
export { type ProviderReply, parseProviderReply, splitBulkAnswer } from "./replies.ts";
