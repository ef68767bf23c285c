// `npm run deploy -- <app> <version> --hosts <inventory.json> [--region fsn1] [--batch 1] [--keep 3]
//   [--health-timeout 60000] [--dist dist] [--ssh-key FILE] [--signing-key FILE] [--secrets FILE] [--json]`
// `npm run deploy -- secrets <init|list|rotate|retire|set|export> ...` (cli/secrets-cli.ts)
// Ships one app version to the app hosts over SSH, a batch at a time: builds the binary when dist/
// lacks it, checks its .sha256 and that it is signed, copies it (the host checks the signature and
// the checksum before installing), writes the app's credentials from the operator's secrets store
// (over SSH's stdin, never a command line), switches, restarts, waits for health and rolls a host
// back when it does not come up; a failed batch stops the deploy. It logs in as the inventory's user
// (`deploy`, whose sudo allows only the deploy's commands) and trusts only the host keys the
// inventory pins. docs/deploy.md is the runbook.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { z } from "zod";
import { binaryName, buildBinary, sha256File, Version } from "../build.ts";
import { deployHost, type HostOutcome, type LocalBinary } from "./cli/deploy-host.ts";
import { createKnownHosts } from "./cli/host-keys.ts";
import type { Host } from "./cli/inventory.ts";
import { readInventory } from "./cli/inventory.ts";
import { readLbConfig, rotationsFor } from "./cli/lb.ts";
import { batches, DEPLOYABLE, type DeployApp, targetHosts } from "./cli/plan.ts";
import { appCredentials, credentialPayload } from "./cli/secret-catalog.ts";
import { readStore, storePath } from "./cli/secret-store.ts";
import { SECRETS_USAGE, secretsCommand, UsageError } from "./cli/secrets-cli.ts";
import { createSsh } from "./cli/ssh.ts";

const root = resolve(import.meta.dir, "..", "..");

export const DeployArgs = z
  .object({
    app: z.enum(DEPLOYABLE, { error: `app must be one of ${DEPLOYABLE.join(", ")}` }),
    version: Version,
    hosts: z.string().min(1, "--hosts <inventory.json> is required"),
    region: z.string().min(1).optional(),
    batch: z.coerce.number().int().min(1).max(100).default(1),
    keep: z.coerce.number().int().min(1).max(50).default(3),
    "health-timeout": z.coerce.number().int().min(1000).max(3_600_000).default(60_000),
    dist: z.string().min(1).default(join(root, "dist")),
    "ssh-key": z.string().min(1).optional(),
    /** Signs a binary the deploy builds because dist/ lacks it (default RELEASE_SIGNING_KEY). */
    "signing-key": z.string().min(1).optional(),
    /** The operator's secrets store (default CAPTCHA_PIPELINE_SECRETS, else ~/.config/captcha-pipeline/secrets.json). */
    secrets: z.string().min(1).optional(),
    json: z.literal(true).optional(),
  })
  .strict();
export type DeployArgs = z.infer<typeof DeployArgs>;

export function parseDeployArgs(argv: string[]): { ok: true; args: DeployArgs } | { ok: false; error: string } {
  const positional: string[] = [];
  const flags: Record<string, unknown> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(a);
    if (!m) positional.push(a);
    else if (m[1] === "json") flags.json = true;
    else flags[m[1]!] = m[2] ?? argv[++i];
  }
  const r = DeployArgs.safeParse({ app: positional[0], version: positional[1], ...flags });
  if (!r.success)
    return {
      ok: false,
      error: r.error.issues
        .map(
          (i) =>
            `${i.path.length ? (["app", "version"].includes(String(i.path[0])) ? "" : "--") + i.path.join(".") : "(arguments)"}: ${i.message}`,
        )
        .join("\n"),
    };
  if (positional.length > 2) return { ok: false, error: `unexpected argument ${JSON.stringify(positional[2])}` };
  return { ok: true, args: r.data };
}

/**
 * The binary from dist/ (built and signed there when missing), refused before any host is touched
 * when it does not match its .sha256 or has no signature (`.sha256.sig`). The signature itself is
 * checked by each host, against its allowed_signers, before it installs anything.
 */
export function localBinaries(
  app: DeployApp,
  version: string,
  dist: string,
  log: (m: string) => void,
  signingKey?: string,
) {
  const cache = new Map<string, Promise<LocalBinary>>();
  return (arch: "x64" | "arm64"): Promise<LocalBinary> => {
    let p = cache.get(arch);
    if (!p) {
      p = (async () => {
        const path = join(dist, binaryName(app, version, arch));
        if (!existsSync(path) || !existsSync(`${path}.sha256`)) {
          if (!signingKey)
            throw new Error(
              `${path} is missing, and building it needs the release signing key (--signing-key FILE or RELEASE_SIGNING_KEY)`,
            );
          log(
            `${path} missing: building it (npm run build -- --version ${version} --apps ${app} --arch ${arch} --signing-key ${signingKey})`,
          );
          await buildBinary({ app, arch, version, outDir: dist, signingKey });
        }
        const [want, name] = readFileSync(`${path}.sha256`, "utf8").trim().split(/\s+/);
        const got = await sha256File(path);
        if (want !== got) throw new Error(`${path}: sha256 ${got} does not match its .sha256 (${want}); rebuild it`);
        if (name !== basename(path))
          throw new Error(`${path}.sha256 names ${JSON.stringify(name)}, not ${basename(path)}: rebuild it`);
        if (!existsSync(`${path}.sha256.sig`))
          throw new Error(
            `${path}.sha256.sig is missing: an unsigned release is refused (npm run build -- --signing-key FILE)`,
          );
        const sig = readFileSync(`${path}.sha256.sig`, "utf8");
        if (!sig.startsWith("-----BEGIN SSH SIGNATURE-----"))
          throw new Error(`${path}.sha256.sig is not an SSH signature (ssh-keygen -Y sign)`);
        return { path, sha256: got, signature: Buffer.from(sig).toString("base64") };
      })();
      cache.set(arch, p);
    }
    return p;
  };
}

export interface DeployReport {
  app: DeployApp;
  version: string;
  ok: boolean;
  hosts: HostOutcome[];
  /** Hosts never touched because an earlier batch failed. */
  skipped: string[];
}

export async function deploy(args: DeployArgs, log: (m: string) => void): Promise<DeployReport> {
  const inventory = readInventory(args.hosts);
  const hosts = targetHosts(inventory.hosts, args.region);
  if (!hosts.length)
    throw new Error(`no host with role "app"${args.region ? ` in region ${args.region}` : ""} in ${args.hosts}`);
  // Every host's credentials before any host is touched: a store or a region missing stops here.
  const store = readStore(storePath(args.secrets));
  const payloads = new Map<string, string>(
    hosts.map((h) => [h.name, credentialPayload(appCredentials(store, args.app, h.region))]),
  );
  const credentials = (h: Host) => payloads.get(h.name)!;
  const signingKey = args["signing-key"] ?? (process.env.RELEASE_SIGNING_KEY || undefined);
  const binary = localBinaries(args.app, args.version, args.dist, log, signingKey);
  // The gateway leaves the inventory's load balancer around its restart (cli/lb.ts); the others have no LB.
  const rotationOf = rotationsFor(args.app === "gateway" ? readLbConfig(args.hosts) : undefined, hosts);
  const dir = mkdtempSync(join(tmpdir(), "deploy-known-hosts-"));
  try {
    const knownHosts = createKnownHosts(join(dir, "known_hosts"));
    const ssh = createSsh({ knownHosts: knownHosts.file, ...(args["ssh-key"] ? { key: args["ssh-key"] } : {}) });
    const outcomes: HostOutcome[] = [];
    const plan = batches(hosts, args.batch);
    for (const [i, batch] of plan.entries()) {
      log(`batch ${i + 1}/${plan.length}: ${batch.map((h) => h.name).join(", ")}`);
      const done = await Promise.all(
        batch.map(async (h): Promise<HostOutcome> => {
          const refused = await knownHosts.pin(h);
          if (refused) {
            log(`[${h.name}] failed: ${refused}`);
            return { host: h.name, status: "failed", version: args.version, ms: 0, reason: refused };
          }
          return deployHost(h, args.app, args.version, {
            ssh,
            binary,
            log,
            healthTimeoutMs: args["health-timeout"],
            keep: args.keep,
            credentials,
            ...(rotationOf(h) ? { rotation: rotationOf(h) } : {}),
          });
        }),
      );
      outcomes.push(...done);
      if (done.some((o) => o.status !== "deployed")) {
        const skipped = plan
          .slice(i + 1)
          .flat()
          .map((h) => h.name);
        if (skipped.length) log(`stopping: batch ${i + 1} did not deploy cleanly; not touched: ${skipped.join(", ")}`);
        return { app: args.app, version: args.version, ok: false, hosts: outcomes, skipped };
      }
    }
    return { app: args.app, version: args.version, ok: true, hosts: outcomes, skipped: [] };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `npm run deploy -- secrets ...`: exits 0, 2 on a usage error, 1 otherwise. */
async function secretsMain(argv: string[]): Promise<never> {
  try {
    // A value comes from a file or a pipe, never typed at a terminal (it would echo there).
    const stdin = async () => {
      if (process.stdin.isTTY)
        throw new UsageError("the value comes on stdin from a file or a pipe (< file), not typed");
      return await new Response(Bun.stdin.stream()).text();
    };
    await secretsCommand(argv, (l) => console.log(l), { stdin });
    process.exit(0);
  } catch (err) {
    console.error(`deploy secrets: ${(err as Error).message}`);
    if (err instanceof UsageError) console.error(SECRETS_USAGE);
    process.exit(err instanceof UsageError ? 2 : 1);
  }
}

if (import.meta.main) {
  if (Bun.argv[2] === "secrets") await secretsMain(Bun.argv.slice(3));
  const parsed = parseDeployArgs(Bun.argv.slice(2));
  if (!parsed.ok) {
    console.error(
      `deploy: ${parsed.error}\nusage: npm run deploy -- <${DEPLOYABLE.join("|")}> <version> --hosts <inventory.json> [--region R] [--batch N] [--keep N] [--health-timeout MS] [--dist DIR] [--ssh-key FILE] [--signing-key FILE] [--secrets FILE] [--json]\n       npm run deploy -- secrets init|list|rotate|retire|set|export ...`,
    );
    process.exit(2);
  }
  const { args } = parsed;
  try {
    const report = await deploy(args, (m) => console.error(m));
    if (args.json) console.log(JSON.stringify(report, null, 2));
    else {
      for (const h of report.hosts)
        console.log(`${h.host}: ${h.status}${"reason" in h ? ` (${h.reason})` : ""} in ${(h.ms / 1000).toFixed(1)} s`);
      console.log(
        `${args.app} ${args.version}: ${report.ok ? "deployed" : "NOT deployed"} on ${report.hosts.filter((h) => h.status === "deployed").length}/${report.hosts.length + report.skipped.length} host(s)`,
      );
    }
    process.exit(report.ok ? 0 : 1);
  } catch (err) {
    console.error(`deploy: ${(err as Error).message}`);
    process.exit(1);
  }
}
