// `npm run rehearse -- deploy-gapless [--no-drain] [--version v2]`: on a fleet that is up, 20 tasks
// a second through the load balancer while `npm run deploy -- gateway <version>` runs, then one
// line: `deploy gateway <version>: hosts N, requests R, failed requests F, longest pause P s`.
// With the inventory's `lb` (the default) each gateway leaves HAProxy before its restart
// (infra/deploy/cli/lb.ts); `--no-drain` deploys with the inventory without it (a restart in place).
// A request fails when it does not answer 202; the longest pause is the longest time between two
// successful answers (from the load's start to its end).
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { runtimeCommand, serverStat } from "../deploy/cli/lb-haproxy.ts";
import { type LbClient, lbFetch } from "./client.ts";
import { DATA, LB_ADMIN_PORT, NO_LB_INVENTORY, REPO } from "./config.ts";
import { check, type Log, run, sleep, waitFor } from "./exec.ts";
import { ensureSecrets, storeFile } from "./secrets.ts";
import { readState, type State } from "./state.ts";

export interface LoadReport {
  requests: number;
  failed: number;
  longestPauseS: number;
  /** Each failure's reason (status or error) and how many. */
  failures: Record<string, number>;
}

/** DELETE /v1/tasks/<id>: whether the task was cancelled (or had already ended). */
async function cancel(c: LbClient, id: string): Promise<boolean> {
  try {
    const res = await lbFetch(c, `/v1/tasks/${id}`, { method: "DELETE", timeoutMs: 10_000 });
    await res.arrayBuffer();
    return res.status < 300 || res.status === 409;
  } catch {
    return false;
  }
}

/** POSTs a task every 1000/perSecond ms until stopped; each answer's time and outcome recorded. */
export function startLoad(c: LbClient, perSecond = 20): { stop(): Promise<LoadReport> } {
  const t0 = performance.now();
  const okAt: number[] = [];
  const failures: Record<string, number> = {};
  const pending = new Set<Promise<void>>();
  const cancels: Promise<boolean>[] = [];
  let n = 0;
  const tag = `gapless-${Date.now()}`;
  const one = async (i: number) => {
    let why: string | undefined;
    try {
      const res = await lbFetch(c, "/v1/tasks", {
        method: "POST",
        headers: { "idempotency-key": `${tag}-${i}` },
        body: {
          type: "turnstile",
          params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/rehearsal/${tag}/${i}` },
        },
        timeoutMs: 10_000,
      });
      const body = (await res.json().catch(() => ({}))) as { id?: string; title?: string };
      if (res.status !== 202) why = `HTTP ${res.status}${body.title ? ` ${body.title}` : ""}`;
      // Cancelled at once: the load stays under the key's maxInFlight quota (1000 open tasks),
      // which 20 tasks/s outrun (the solver's first poll of a task comes after about 10 s).
      else if (body.id) cancels.push(cancel(c, body.id));
    } catch (err) {
      why = (err as Error).name === "TimeoutError" ? "timeout (10 s)" : (err as Error).message.slice(0, 80);
    }
    if (why) failures[why] = (failures[why] ?? 0) + 1;
    else okAt.push(performance.now());
  };
  const timer = setInterval(() => {
    const p = one(n++).finally(() => pending.delete(p));
    pending.add(p);
  }, 1000 / perSecond);
  return {
    async stop() {
      clearInterval(timer);
      await Promise.all(pending);
      const notCancelled = (await Promise.all(cancels)).filter((ok) => !ok).length;
      if (notCancelled) failures["(not counted) cancel failed"] = notCancelled;
      const marks = [t0, ...okAt.sort((a, b) => a - b), performance.now()];
      let longest = 0;
      for (let i = 1; i < marks.length; i++) longest = Math.max(longest, marks[i]! - marks[i - 1]!);
      const failed = Object.entries(failures)
        .filter(([k]) => !k.startsWith("(not counted)"))
        .reduce((a, [, b]) => a + b, 0);
      return { requests: n, failed, longestPauseS: Math.round(longest / 100) / 10, failures };
    },
  };
}

/**
 * `app` at `version`, built and signed once per commit into .data/rehearsal/dist/<folder>-<commit>
 * (a binary of an older commit would lack what the fleet's config now asks of it).
 */
export function releaseOnce(app: string, version: string, folder: string, signingKey: string, log: Log): string {
  const rev = run(["git", "rev-parse", "--short=12", "HEAD"], { cwd: REPO }).stdout.trim() || "unknown";
  const dist = join(DATA, "dist", `${folder}-${rev}`);
  if (existsSync(join(dist, `${app}-${version}-linux-x64.sha256.sig`))) return dist;
  mkdirSync(dist, { recursive: true });
  log(`$ npm run build -- --version ${version} --arch x64 --apps ${app} --out ${dist}`);
  check(
    ["node", "infra/bootstrap.mjs", "build", "--version", version, "--arch", "x64", "--apps", app].concat([
      "--out",
      dist,
      "--signing-key",
      signingKey,
    ]),
    { cwd: REPO, timeoutMs: 1_200_000 },
  );
  return dist;
}

/** Every gateway named UP in the LB's HAProxy (its runtime API). */
export async function allGatewaysUp(lbIp: string, names: string[], timeoutMs = 90_000): Promise<void> {
  await waitFor("every gateway UP in HAProxy", timeoutMs, async () => {
    const csv = await runtimeCommand(`${lbIp}:${LB_ADMIN_PORT}`, "show stat").catch(() => "");
    return names.every((n) => serverStat(csv, "gateways", n)?.status === "UP") ? true : undefined;
  });
}

/** `npm run deploy -- <app> <version> ...`, without blocking the load (its log to stderr); the hosts it deployed. */
export async function deployApp(args: string[], log: Log): Promise<{ ok: boolean; hosts: number }> {
  log(`$ npm run deploy -- ${args.join(" ")}`);
  const p = Bun.spawn(["node", "infra/bootstrap.mjs", "deploy", ...args, "--json"], {
    cwd: REPO,
    stdout: "pipe",
    stderr: "inherit",
  });
  const [out, code] = await Promise.all([new Response(p.stdout).text(), p.exited]);
  try {
    const report = JSON.parse(out) as { ok: boolean; hosts: Array<{ status: string }> };
    return { ok: code === 0 && report.ok, hosts: report.hosts.filter((h) => h.status === "deployed").length };
  } catch {
    return { ok: false, hosts: 0 };
  }
}

export interface GaplessResult extends LoadReport {
  version: string;
  drain: boolean;
  hosts: number;
  deployed: boolean;
  line: string;
}

export async function gaplessDeploy(
  state: State,
  o: { drain: boolean; version: string; perSecond?: number },
  log: Log,
): Promise<GaplessResult> {
  const s = ensureSecrets();
  const lb = state.hosts.find((h) => h.role === "lb");
  const apps = state.hosts.filter((h) => h.role === "app").map((h) => h.name);
  if (!lb || !state.lbUrl || !state.apiKey || !state.inventory)
    throw new Error("no rehearsal is up: `npm run rehearse`");
  const dist = releaseOnce("gateway", o.version, "gapless", s.signingKey, log);
  await allGatewaysUp(lb.ip, apps);
  const client: LbClient = { url: state.lbUrl, ca: s.caPem, apiKey: state.apiKey };
  // Under the key's maxInFlight quota (a previous run's tasks may still be open).
  await waitFor(
    "a task accepted through the LB (the key's in-flight quota)",
    600_000,
    async () => {
      const probe = startLoad(client, 1);
      await sleep(500);
      return (await probe.stop()).failed === 0 ? true : undefined;
    },
    5000,
  );
  const load = startLoad(client, o.perSecond ?? 20);
  await sleep(2000);
  const deployed = await deployApp(
    ["gateway", o.version, "--hosts", o.drain ? state.inventory : NO_LB_INVENTORY, "--dist", dist]
      .concat(["--ssh-key", s.sshKey])
      .concat(state.secrets === "store" ? ["--secrets", state.secretsStore ?? storeFile(REPO)] : []),
    log,
  );
  await sleep(2000);
  const r = await load.stop();
  const line = `deploy gateway ${o.version}: hosts ${deployed.hosts}, requests ${r.requests}, failed requests ${r.failed}, longest pause ${r.longestPauseS.toFixed(1)} s (${o.drain ? "each host drained through the LB first" : "no drain: restarted in place"})`;
  if (r.failed) log(`failures: ${JSON.stringify(r.failures)}`);
  return { ...r, version: o.version, drain: o.drain, hosts: deployed.hosts, deployed: deployed.ok, line };
}

/** The command: `npm run rehearse -- deploy-gapless [--no-drain] [--version v2]`; exits 1 when a request failed. */
export async function gaplessMain(argv: string[], log: Log): Promise<number> {
  const state = readState();
  if (state?.phase !== "up") {
    console.error("no rehearsal is up: `npm run rehearse` first");
    return 1;
  }
  const at = argv.indexOf("--version");
  const version = at >= 0 ? argv[at + 1]! : "v2";
  const r = await gaplessDeploy(state, { drain: !argv.includes("--no-drain"), version }, log);
  console.log(r.line);
  return r.deployed && r.failed === 0 ? 0 : 1;
}

if (import.meta.main) process.exit(await gaplessMain(Bun.argv.slice(2), (m) => console.error(`[rehearse] ${m}`)));
