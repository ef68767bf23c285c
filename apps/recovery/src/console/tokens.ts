// The console's operator credentials: `name:role:token` entries (CONSOLE_TOKENS, comma- or
// newline-separated, or one a line in CONSOLE_TOKENS_FILE). Roles: `viewer` reads, `operator`
// also redrives. Tokens are compared as SHA-256 digests in constant time and never logged; a
// session cookie carries the entry's name and role under an HMAC of a per-process secret, never
// the token itself.
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";

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
    if (!name || !NAME.test(name)) throw new TokenConfigError(`console token entry ${i + 1}: a name of letters, digits, _ . @ - is required`);
    if (role !== "viewer" && role !== "operator") throw new TokenConfigError(`console token entry ${i + 1} (${name}): role must be viewer or operator`);
    if (token.length < 16) throw new TokenConfigError(`console token entry ${i + 1} (${name}): the token must have at least 16 characters`);
    if (entries.some((e) => e.name === name)) throw new TokenConfigError(`console token entry ${i + 1} (${name}): name used twice`);
    entries.push({ name, role, digest: digest(token) });
  });
  const principals = entries.map(({ name, role }) => ({ name, role })) as Principal[] & { check(token: string): Principal | undefined };
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

/** Signed sessions: `<name>.<role>.<expiry ms>.<hmac>`, verified in constant time. */
export function sessions(secret: Buffer = randomBytes(32), ttlMs = 12 * 3600_000) {
  const mac = (body: string) => createHmac("sha256", secret).update(body).digest("base64url");
  return {
    issue(p: Principal, now = Date.now()): string {
      const body = `${p.name}.${p.role}.${now + ttlMs}`;
      return `${body}.${mac(body)}`;
    },
    verify(cookie: string | undefined, now = Date.now()): Principal | undefined {
      if (!cookie) return undefined;
      const i = cookie.lastIndexOf(".");
      if (i < 0) return undefined;
      const body = cookie.slice(0, i);
      const given = Buffer.from(cookie.slice(i + 1));
      const want = Buffer.from(mac(body));
      if (given.length !== want.length || !timingSafeEqual(given, want)) return undefined;
      // Names may hold dots: the role and expiry are the last two fields.
      const fields = body.split(".");
      const expiry = Number(fields.at(-1));
      const r = fields.at(-2);
      const n = fields.slice(0, -2).join(".");
      if (!(expiry > now) || (r !== "viewer" && r !== "operator")) return undefined;
      return { name: n, role: r };
    },
  };
}
