import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { appCredentials, CREDENTIAL_NAME, catalog, credentialPayload } from "./secret-catalog.ts";
import { readStore, type StoreFile, storePath, writeStore } from "./secret-store.ts";
import { secretsCommand } from "./secrets-cli.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A fresh store path in a folder of its own, and a runner that keeps every line the commands said. */
function setup() {
  const dir = mkdtempSync(join(tmpdir(), "secrets-"));
  dirs.push(dir);
  const store = join(dir, "config", "captcha-pipeline", "secrets.json");
  const said: string[] = [];
  const run = (argv: string[], stdin?: string) =>
    secretsCommand([...argv, "--store", store], (l) => said.push(l), {
      env: {},
      ...(stdin !== undefined ? { stdin: async () => stdin } : {}),
    });
  return { dir, store, said, run };
}

/** Every value and previous value a store holds. */
const valuesOf = (s: StoreFile) =>
  Object.values(s.secrets).flatMap((e) => [e.value, ...(e.previous ? [e.previous.value] : [])]);

/** Asserts no secret of the store (nor any 8-character piece of one) is in `text`. */
function expectNoValue(s: StoreFile, text: string) {
  for (const v of valuesOf(s)) {
    const token = v.split(":").pop()!;
    for (let i = 0; i + 8 <= token.length; i += 8) expect(text).not.toContain(token.slice(i, i + 8));
  }
}

describe("the secrets store", () => {
  test("init generates every secret the fleet needs once, into a 0600 file in a 0700 folder, and prints no value", async () => {
    const { store, said, run } = setup();
    await run(["init", "--regions", "fsn1,hel1"]);
    expect(statSync(store).mode & 0o777).toBe(0o600);
    expect(statSync(join(store, "..")).mode & 0o777).toBe(0o700);
    const s = readStore(store);
    expect(Object.keys(s.secrets).sort()).toEqual(
      catalog(["fsn1", "hel1"])
        .map((c) => c.name)
        .sort(),
    );
    for (const name of [
      "api-key-pepper",
      "api-keys",
      "webhook-secret",
      "console-tokens",
      "fsn1/nats/gateway",
      "hel1/nats/leaf",
      "hel1/postgres/pipeline_rollout",
      "fsn1/witness/recovery",
      "witness/nats/system",
    ])
      expect(s.secrets[name]?.value).toBeString();
    // Long random values, all different; passwords in the alphabet nats-render-config and URLs take.
    const values = valuesOf(s);
    expect(new Set(values).size).toBe(values.length);
    expect(s.secrets["api-key-pepper"]!.value).toMatch(/^[0-9a-f]{64}$/);
    expect(s.secrets["fsn1/postgres/pipeline_gateway"]!.value).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(s.secrets["console-tokens"]!.value).toMatch(/^operator:operator:[0-9a-f]{64}$/);
    expect(said.join("\n")).toContain("fsn1/nats/gateway");
    expectNoValue(s, said.join("\n"));

    // Again: nothing changes. With a third region: only its secrets are added.
    const before = readFileSync(store, "utf8");
    await run(["init"]);
    expect(readFileSync(store, "utf8")).toBe(before);
    await run(["init", "--regions", "nbg1"]);
    const after = readStore(store);
    expect(after.regions).toEqual(["fsn1", "hel1", "nbg1"]);
    expect(after.secrets["fsn1/nats/gateway"]).toEqual(s.secrets["fsn1/nats/gateway"]!);
    expect(after.secrets["nbg1/postgres/pipeline_owner"]?.value).toMatch(/^[A-Za-z0-9_-]{32}$/);
  });

  test("rotate rolls one secret, keeps the one before as previous, says what to redeploy; retire drops it", async () => {
    const { store, said, run } = setup();
    await run(["init", "--regions", "fsn1"]);
    const old = readStore(store).secrets["webhook-secret"]!.value;
    said.length = 0;
    await run(["rotate", "webhook-secret"]);
    const s = readStore(store);
    expect(s.secrets["webhook-secret"]!.value).not.toBe(old);
    expect(s.secrets["webhook-secret"]!.previous?.value).toBe(old);
    expect(s.secrets["api-keys"]!.previous).toBeUndefined();
    const text = said.join("\n");
    expect(text).toContain("npm run deploy -- solver <each running solver version> --hosts inventory.json");
    expect(text).toContain("npm run deploy -- gateway <its running version> --hosts inventory.json");
    expect(text).toContain("secrets retire webhook-secret");
    expectNoValue(s, text);
    // The gateway and the solver sign with both until it is retired.
    expect(appCredentials(s, "solver", "fsn1")).toMatchObject({
      WEBHOOK_SECRET: s.secrets["webhook-secret"]!.value,
      WEBHOOK_SECRET_PREVIOUS: old,
    });
    await run(["retire", "webhook-secret"]);
    expect(readStore(store).secrets["webhook-secret"]!.previous).toBeUndefined();
    expect(appCredentials(readStore(store), "gateway", "fsn1").WEBHOOK_SECRET_PREVIOUS).toBe("");

    said.length = 0;
    await run(["rotate", "fsn1/postgres/pipeline_gateway"]);
    expect(said.join("\n")).toContain("ALTER ROLE pipeline_gateway");
    expect(said.join("\n")).toContain(
      "npm run deploy -- gateway <its running version> --hosts inventory.json --region fsn1",
    );
    // The pepper is not rotated: every client id hangs on it.
    await expect(run(["rotate", "api-key-pepper"])).rejects.toThrow("is not rotated: every client id");
    await expect(run(["rotate", "no-such-secret"])).rejects.toThrow('no secret named "no-such-secret"');
  });

  test("a store others may read, or one inside the repository, is refused", async () => {
    const { store, run } = setup();
    await run(["init", "--regions", "fsn1"]);
    chmodSync(store, 0o644);
    expect(() => readStore(store)).toThrow("is mode 0644: only its owner may read it (chmod 600)");
    chmodSync(store, 0o600);
    const inRepo = resolve(import.meta.dir, "secrets.json");
    expect(() => writeStore(inRepo, readStore(store))).toThrow("is inside the repository");
    expect(existsSync(inRepo)).toBe(false);
    await expect(run(["list"])).resolves.toBeUndefined();
    expect(() => readStore(join(store, "..", "none.json"))).toThrow("no secrets store at");
  });

  test("the default path is outside the repository: CAPTCHA_PIPELINE_SECRETS, else ~/.config", () => {
    expect(storePath(undefined, { HOME: "/home/op" })).toBe("/home/op/.config/captcha-pipeline/secrets.json");
    expect(storePath(undefined, { HOME: "/home/op", XDG_CONFIG_HOME: "/cfg" })).toBe(
      "/cfg/captcha-pipeline/secrets.json",
    );
    expect(storePath(undefined, { CAPTCHA_PIPELINE_SECRETS: "/vault/s.json" })).toBe("/vault/s.json");
    expect(storePath("/x/y.json", { CAPTCHA_PIPELINE_SECRETS: "/vault/s.json" })).toBe("/x/y.json");
  });

  test("set takes a value made elsewhere on stdin; export writes one into a new 0600 file; neither prints it", async () => {
    const { dir, store, said, run } = setup();
    await run(["init", "--regions", "fsn1"]);
    await run(["set", "fsn1/nats/gateway"], "imported-password-0123456789\n");
    const s = readStore(store);
    expect(s.secrets["fsn1/nats/gateway"]!.value).toBe("imported-password-0123456789");
    const out = join(dir, "client-key");
    await run(["export", "api-keys", "--out", out]);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    expect(readFileSync(out, "utf8")).toBe(`${s.secrets["api-keys"]!.value}\n`);
    await expect(run(["export", "api-keys", "--out", out])).rejects.toThrow("EEXIST");
    expectNoValue(readStore(store), said.join("\n"));
  });

  test("each app's credentials: the names its unit loads, the values of its region; rollout gets the other regions'", async () => {
    const { store, run } = setup();
    await run(["init", "--regions", "fsn1,hel1"]);
    const s = readStore(store);
    const v = (n: string) => s.secrets[n]!.value;
    expect(appCredentials(s, "gateway", "hel1")).toEqual({
      NATS_PASSWORD: v("hel1/nats/gateway"),
      DATABASE_PASSWORD: v("hel1/postgres/pipeline_gateway"),
      API_KEYS: v("api-keys"),
      API_KEY_PEPPER: v("api-key-pepper"),
      WEBHOOK_SECRET: v("webhook-secret"),
      WEBHOOK_SECRET_PREVIOUS: "",
    });
    expect(appCredentials(s, "recovery", "fsn1")).toEqual({
      NATS_PASSWORD: v("fsn1/nats/recovery"),
      DATABASE_PASSWORD: v("fsn1/postgres/pipeline_owner"),
      WITNESS_PASSWORD: v("fsn1/witness/recovery"),
      CONSOLE_TOKENS: v("console-tokens"),
    });
    expect(appCredentials(s, "rollout", "fsn1")).toEqual({
      NATS_PASSWORD: v("fsn1/nats/rollout"),
      DATABASE_PASSWORD: v("fsn1/postgres/pipeline_rollout"),
      NATS_PASSWORD_HEL1: v("hel1/nats/rollout"),
      DATABASE_PASSWORD_HEL1: v("hel1/postgres/pipeline_rollout"),
    });
    await run(["rotate", "api-keys"]);
    const r = readStore(store);
    expect(appCredentials(r, "gateway", "fsn1").API_KEYS).toBe(
      `${r.secrets["api-keys"]!.value},${r.secrets["api-keys"]!.previous!.value}`,
    );
    expect(() => appCredentials(s, "solver", "nbg1")).toThrow("the secrets store has no region nbg1");
  });

  test("the payload the host reads on stdin: one `NAME base64` line each; a name that is no setting is refused", () => {
    const p = credentialPayload({ API_KEY_PEPPER: "a b\nc", WEBHOOK_SECRET_PREVIOUS: "", NATS_PASSWORD_HEL1: "x" });
    expect(p).toBe(
      `API_KEY_PEPPER ${Buffer.from("a b\nc").toString("base64")}\nWEBHOOK_SECRET_PREVIOUS \nNATS_PASSWORD_HEL1 eA==\n`,
    );
    for (const bad of ["../etc/passwd", "api_key", "A B", "regions/../X"]) {
      expect(CREDENTIAL_NAME.test(bad)).toBe(false);
      expect(() => credentialPayload({ [bad]: "x" })).toThrow("is not a setting's");
    }
  });
});
