// The console's operator credentials: `name:role:token` entries (CONSOLE_TOKENS, comma- or
// newline-separated, or one a line in CONSOLE_TOKENS_FILE). Roles: `viewer` reads, `operator`
// also redrives. Tokens are compared as SHA-256 digests in constant time and never logged; a
// session cookie is a random id the server looks up (and forgets at sign-out), never the token.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

export type Role = "viewer" | "operator";
export interface Principal {
  name: string;
  role: Role;
}
interface Entry extends Principal {
  digest: Buffer;
}

export class TokenConfigError extends Error {
  override name = "TokenConfigError";
}

const digest = (s: string) => createHash("sha256").update(s).digest();
const NAME = /^[A-Za-z0-9_.@-]{1,64}$/;

/** Parses the entries; a bad one is named by its position and name, never by its token. */
export function parseTokens(text: string): Principal[] & { check(token: string): Principal | undefined } {
  const entries: Entry[] = [];
  // Comment lines (#) first, then entries split on commas and newlines.
  const parts = text
    .split("\n")
    .filter((l) => !l.trim().startsWith("#"))
    .flatMap((l) => l.split(","))
    .map((s) => s.trim())
    .filter(Boolean);
  parts.forEach((p, i) => {
    const [name, role, ...rest] = p.split(":");
    const token = rest.join(":");
    if (!name || !NAME.test(name))
      throw new TokenConfigError(`console token entry ${i + 1}: a name of letters, digits, _ . @ - is required`);
    if (role !== "viewer" && role !== "operator")
      throw new TokenConfigError(`console token entry ${i + 1} (${name}): role must be viewer or operator`);
    if (token.length < 16)
      throw new TokenConfigError(`console token entry ${i + 1} (${name}): the token must have at least 16 characters`);
    if (entries.some((e) => e.name === name))
      throw new TokenConfigError(`console token entry ${i + 1} (${name}): name used twice`);
    entries.push({ name, role, digest: digest(token) });
  });
  const principals = entries.map(({ name, role }) => ({ name, role })) as Principal[] & {
    check(token: string): Principal | undefined;
  };
  principals.check = (token: string) => {
    const d = digest(token);
    let found: Principal | undefined;
    // Every entry is compared (no early exit), each in constant time.
    for (const e of entries) if (timingSafeEqual(d, e.digest) && !found) found = { name: e.name, role: e.role };
    return found;
  };
  return principals;
}

/** A random token for a generated entry (npm run dev). */
export const newToken = () => randomBytes(24).toString("base64url");

export interface Session extends Principal {
  /** A key for what the server keeps per session (the digest of its cookie; not the cookie). */
  sid: string;
}

/**
 * Server-side sessions: the cookie is 32 random bytes, the server keeps its SHA-256 digest with
 * the principal and an expiry. `revoke` (sign-out) forgets it, so a copy of the cookie stops
 * working at once; a restart forgets them all. At most `maxSessions` live at once: past that,
 * the expired go first, then the oldest.
 */
export function sessions(o: { ttlMs?: number; maxSessions?: number } = {}) {
  const ttlMs = o.ttlMs ?? 12 * 3600_000;
  const maxSessions = o.maxSessions ?? 1000;
  const live = new Map<string, { p: Principal; expiry: number }>();
  const sidOf = (cookie: string) => createHash("sha256").update(cookie).digest("hex");
  const makeRoom = (now: number) => {
    if (live.size < maxSessions) return;
    for (const [k, s] of live) if (s.expiry <= now) live.delete(k);
    for (const k of live.keys()) {
      if (live.size < maxSessions) break;
      live.delete(k);
    }
  };
  return {
    /** A new session of `p`: the cookie's value. */
    issue(p: Principal, now = Date.now()): string {
      makeRoom(now);
      const cookie = randomBytes(32).toString("base64url");
      live.set(sidOf(cookie), { p: { name: p.name, role: p.role }, expiry: now + ttlMs });
      return cookie;
    },
    /** The session of a cookie, while it is live (issued here, not revoked, not expired). */
    verify(cookie: string | undefined, now = Date.now()): Session | undefined {
      if (!cookie || cookie.length > 100) return undefined;
      const sid = sidOf(cookie);
      const s = live.get(sid);
      if (!s) return undefined;
      if (s.expiry <= now) {
        live.delete(sid);
        return undefined;
      }
      return { ...s.p, sid };
    },
    /** Ends the session of a cookie (sign-out); its sid, when it was live. */
    revoke(cookie: string | undefined): string | undefined {
      if (!cookie) return undefined;
      const sid = sidOf(cookie);
      return live.delete(sid) ? sid : undefined;
    },
    size: () => live.size,
  };
}
