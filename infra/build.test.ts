// Release signatures (`npm run build` signs each binary's .sha256 with ssh-keygen -Y sign): a good
// signature verifies the way the hosts check it, anything else does not, and the command does not
// build an unsigned release unless told to.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { allowedSignersLine, parseBuildArgs, signChecksum, verifyChecksum } from "./build.ts";

let dir: string;
const keygen = (name: string) => {
  const key = join(dir, name);
  const r = spawnSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", name, "-f", key]);
  expect(r.status).toBe(0);
  return key;
};

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "build-sign-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("release signatures", () => {
  test("a signed .sha256 verifies against allowed_signers; a changed line or another key's signature does not", () => {
    const release = keygen("release");
    const other = keygen("other");
    const signers = join(dir, "allowed_signers");
    writeFileSync(signers, `${allowedSignersLine(readFileSync(`${release}.pub`, "utf8"))}\n`);
    const sum = join(dir, "gateway-v1-linux-x64.sha256");
    writeFileSync(sum, `${"a".repeat(64)}  gateway-v1-linux-x64\n`);
    expect(signChecksum(sum, release)).toBe(`${sum}.sig`);
    expect(readFileSync(`${sum}.sig`, "utf8")).toStartWith("-----BEGIN SSH SIGNATURE-----");
    const good = verifyChecksum(sum, signers);
    expect(good).toMatchObject({ ok: true });
    expect(good.message).toContain('Good "captcha-pipeline-release" signature');

    // The same signature over another checksum (a tampered binary's), or another version's name.
    writeFileSync(sum, `${"b".repeat(64)}  gateway-v1-linux-x64\n`);
    expect(verifyChecksum(sum, signers).ok).toBe(false);
    writeFileSync(sum, `${"a".repeat(64)}  gateway-v2-linux-x64\n`);
    expect(verifyChecksum(sum, signers).ok).toBe(false);

    // Signed by a key the hosts do not trust.
    writeFileSync(sum, `${"a".repeat(64)}  gateway-v1-linux-x64\n`);
    signChecksum(sum, other);
    expect(verifyChecksum(sum, signers).ok).toBe(false);

    // A signature made with the release key for another purpose (namespace) is no release signature.
    const git = spawnSync("ssh-keygen", ["-q", "-Y", "sign", "-f", release, "-n", "git", sum]);
    expect(git.status).toBe(0);
    expect(verifyChecksum(sum, signers).ok).toBe(false);
  });

  test("npm run build will not make an unsigned release unless told to (--unsigned); RELEASE_SIGNING_KEY is the default key", () => {
    const noKey = spawnSync(
      process.execPath,
      [join(import.meta.dir, "build.ts"), "--apps", "emulator", "--arch", "x64", "--out", join(dir, "dist")],
      {
        env: { ...process.env, RELEASE_SIGNING_KEY: "" },
        encoding: "utf8",
      },
    );
    expect(noKey.status).toBe(2);
    expect(noKey.stderr).toContain("--signing-key: a release signing key is required");
    expect(() => parseBuildArgs(["--signing-key", join(dir, "absent")], {})).toThrow("--signing-key: no such file");
    const key = keygen("from-env");
    expect(parseBuildArgs([], { RELEASE_SIGNING_KEY: key })["signing-key"]).toBe(key);
    expect(parseBuildArgs(["--unsigned"], {})).toMatchObject({ unsigned: true });
  });
});
