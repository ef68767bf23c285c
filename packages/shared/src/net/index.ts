export { addressClassAllowed, callbackHostKey, CALLBACK_URL_MAX_LENGTH, checkCallbackUrl, checkResolvedAddresses, STRICT_CALLBACK_POLICY, type CallbackCheck, type CallbackPolicy, type CallbackTarget, type ResolvedAddress, type ResolvedCheck } from "./callback-url.ts";
export { inAnyCidr, parseCidr, type Cidr } from "./cidr.ts";
export { classifyIp, ipFamily, parseIp, parseIPv4, parseIPv6, PRIVATE_CLASSES, type AddressClass } from "./ip.ts";
