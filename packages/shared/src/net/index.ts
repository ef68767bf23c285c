export {
  addressClassAllowed,
  CALLBACK_URL_MAX_LENGTH,
  type CallbackCheck,
  type CallbackPolicy,
  type CallbackTarget,
  callbackHostKey,
  checkCallbackUrl,
  checkResolvedAddresses,
  type ResolvedAddress,
  type ResolvedCheck,
  STRICT_CALLBACK_POLICY,
} from "./callback-url.ts";
export { type Cidr, inAnyCidr, parseCidr } from "./cidr.ts";
export { type AddressClass, classifyIp, ipFamily, PRIVATE_CLASSES, parseIPv4, parseIPv6, parseIp } from "./ip.ts";
