export { classifyError, type ErrorClass, isTemporaryBlock, type ProviderProfile } from "./classify.ts";
export { toProviderParams } from "./params.ts";
export { type ProviderReply, parseProviderReply, splitBulkAnswer } from "./replies.ts";
