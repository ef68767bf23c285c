// Userinfo (user:password@) never printed (issue 14): every URL recovery prints, and every error
// message it prints (a driver's or a tool's text may quote a URL), goes through redactUrl.

/** `scheme://` then a userinfo ending in `@` before the host (no `/`, `@` or space inside it). */
const USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@]*@/gi;

/**
 * The text with the userinfo of every URL in it replaced by `***` (`postgres://***@db:5432/app`),
 * so neither a user name nor a password is shown; a comma-separated server list
 * (`nats://a:b@h1,nats://c:d@h2`) and text around the URLs are handled alike.
 */
export function redactUrl(text: string): string {
  return text.replace(USERINFO, "$1***@");
}

/** True when the URL carries a password (an unparsable one: false). */
export function hasPassword(url: string): boolean {
  try {
    return new URL(url).password !== "";
  } catch {
    return false;
  }
}
