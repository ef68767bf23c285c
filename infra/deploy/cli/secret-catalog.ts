// Every secret the fleet needs (docs/configuration.md, docs/deploy.md "Secrets"), how each is made,
// which app reads it as which credential, and what a rotation asks for. Pure: no I/O here
// (secrets.test.ts). The store (secret-store.ts) holds the values under these names.
import type { DeployApp } from "./plan.ts";
import { type Entry, hexSecret, passwordSecret, type StoreFile, valueOf } from "./secret-store.ts";

export const NATS_APP_USERS = ["gateway", "solver", "recovery", "rollout"] as const;
export const NATS_SERVER_USERS = ["system", "admin", "leaf"] as const;
export const PG_ROLES = ["pipeline_owner", "pipeline_gateway", "pipeline_solver", "pipeline_rollout"] as const;

export interface SecretSpec {
  name: string;
  /** What it is, for `secrets list`. */
  about: string;
  generate(): string;
  /** What must follow a rotation, in order (commands with placeholders the operator fills in). */
  after: string[];
  /** Rotation refused, with the reason (the pepper: every client id would change). */
  noRotate?: string;
}

/** The servers' side: passwords.env on NATS and witness hosts, the Postgres roles (servers.ts). */
const servers = (what: string, region?: string) =>
  `npm run deploy -- secrets servers --hosts inventory.json${region ? ` --region ${region}` : ""} --ssh-key <the ops key> (${what})`;

/** `npm run deploy -- <app> <the running version> --hosts inventory.json [--region R]`: the way credentials reach a host. */
const redeploy = (apps: string[], region?: string) =>
  apps.map(
    (a) =>
      `npm run deploy -- ${a} <${a === "solver" ? "each running solver version" : "its running version"}> --hosts inventory.json${region ? ` --region ${region}` : ""}`,
  );

/** The secrets of a fleet over `regions` (REGIONS order), by store name. */
export function catalog(regions: string[]): SecretSpec[] {
  return [...fleetSecrets(), ...regions.flatMap((r) => regionSecrets(r, regions))];
}

/** The secrets shared by every region. */
function fleetSecrets(): SecretSpec[] {
  return [
    {
      name: "api-key-pepper",
      about: "API_KEY_PEPPER of every gateway: a client id is HMAC(pepper, key)",
      generate: hexSecret,
      after: [],
      noRotate:
        "every client id (task owners, quotas, usage) is derived from it: changing it is a migration (docs/security.md, Client ids), not a rotation",
    },
    {
      name: "api-keys",
      about:
        "API_KEYS of every gateway: the clients' keys (a rotation adds one; the one before stays valid until retired)",
      generate: hexSecret,
      after: [
        ...redeploy(["gateway"]),
        "hand the new key to its client: npm run deploy -- secrets export api-keys --out <file>",
        "once the client uses it: npm run deploy -- secrets retire api-keys, then redeploy the gateways",
      ],
    },
    {
      name: "webhook-secret",
      about: "WEBHOOK_SECRET of gateways and solvers (the one before is WEBHOOK_SECRET_PREVIOUS until retired)",
      generate: hexSecret,
      after: [
        ...redeploy(["solver", "gateway"]),
        "once clients fetched their new callback secret (GET /v1/webhook-secret): npm run deploy -- secrets retire webhook-secret, then redeploy both",
      ],
    },
    {
      name: "console-tokens",
      about: "CONSOLE_TOKENS of recovery: the operator console's `operator` token",
      generate: () => `operator:operator:${hexSecret()}`,
      after: redeploy(["recovery"]),
    },
    {
      name: "witness/nats/system",
      about: "the witness nodes' `system` NATS user",
      generate: passwordSecret,
      after: [servers("passwords.env of every witness node; nats-server restarted one node at a time")],
    },
    {
      name: "witness/nats/admin",
      about: "the witness nodes' `admin` NATS user",
      generate: passwordSecret,
      after: [servers("passwords.env of every witness node; nats-server restarted one node at a time")],
    },
  ];
}

/** One region's secrets: its NATS users, its Postgres roles, its witness user. */
function regionSecrets(r: string, regions: string[]): SecretSpec[] {
  return [
    ...[...NATS_SERVER_USERS, ...NATS_APP_USERS].map((u) => ({
      name: `${r}/nats/${u}`,
      about: `${r}'s NATS user ${u}${u === "leaf" ? " (and leaf_remote in the other regions)" : ""}`,
      generate: passwordSecret,
      after: [
        u === "leaf"
          ? servers(`${r}'s leaf and the other regions' leaf_remote: every region's NATS servers restarted`)
          : servers(`passwords.env of ${r}'s NATS servers; nats-server restarted one server at a time`, r),
        ...((NATS_APP_USERS as readonly string[]).includes(u)
          ? [...redeploy([u], r), ...(u === "rollout" && regions.length > 1 ? ["(rollout: its one host)"] : [])]
          : []),
      ],
    })),
    ...PG_ROLES.map((role) => {
      const app = role === "pipeline_owner" ? "recovery" : role.replace("pipeline_", "");
      return {
        name: `${r}/postgres/${role}`,
        about: `${r}'s Postgres role ${role}${role === "pipeline_owner" ? " (recovery, migrations)" : ""}`,
        generate: passwordSecret,
        after: [
          servers(`ALTER ROLE ${role} on ${r}'s Postgres host, a SCRAM verifier on psql's stdin`, r),
          ...redeploy([app], role === "pipeline_rollout" ? undefined : r),
        ],
      };
    }),
    {
      name: `${r}/witness/recovery`,
      about: `the witness NATS user recovery_${r} (${r}'s lease)`,
      generate: passwordSecret,
      after: [
        servers(`recovery_${r} in every witness node's passwords.env; nats-server restarted one node at a time`),
        ...redeploy(["recovery"], r),
      ],
    },
  ];
}

export function specOf(regions: string[], name: string): SecretSpec {
  const s = catalog(regions).find((x) => x.name === name);
  if (!s)
    throw new Error(
      `no secret named ${JSON.stringify(name)} (npm run deploy -- secrets list names them: ${catalog(regions)
        .slice(0, 4)
        .map((x) => x.name)
        .join(", ")}, ...)`,
    );
  return s;
}

/** A credential file's name: the setting it gives (`API_KEY_PEPPER`, `NATS_PASSWORD_HEL1`). */
export const CREDENTIAL_NAME = /^[A-Z][A-Z0-9_]{0,63}$/;

/** The suffix of another region's settings (apps/rollout/src/config.ts envSuffix). */
const suffix = (region: string) => region.toUpperCase().replace(/-/g, "_");

/** The credentials `app` gets on a host of `region`, by file name (see CREDENTIAL_NAME), from the store. */
export function appCredentials(store: StoreFile, app: DeployApp, region: string): Record<string, string> {
  if (!store.regions.includes(region))
    throw new Error(
      `the secrets store has no region ${region} (it has ${store.regions.join(", ")}): npm run deploy -- secrets init --regions ${[...store.regions, region].join(",")}`,
    );
  const v = (name: string) => valueOf(store, name);
  const e = (name: string): Entry | undefined => store.secrets[name];
  const nats = v(`${region}/nats/${app}`);
  const role = app === "recovery" ? "pipeline_owner" : `pipeline_${app}`;
  const own: Record<string, string> = { NATS_PASSWORD: nats, DATABASE_PASSWORD: v(`${region}/postgres/${role}`) };
  const webhook = () => ({
    WEBHOOK_SECRET: v("webhook-secret"),
    WEBHOOK_SECRET_PREVIOUS: e("webhook-secret")?.previous?.value ?? "",
  });
  switch (app) {
    case "gateway": {
      const keys = e("api-keys");
      return {
        ...own,
        API_KEYS: [v("api-keys"), ...(keys?.previous ? [keys.previous.value] : [])].join(","),
        API_KEY_PEPPER: v("api-key-pepper"),
        ...webhook(),
      };
    }
    case "solver":
      return { ...own, ...webhook() };
    case "recovery":
      return { ...own, WITNESS_PASSWORD: v(`${region}/witness/recovery`), CONSOLE_TOKENS: v("console-tokens") };
    case "rollout": {
      const others: Record<string, string> = {};
      for (const o of store.regions.filter((x) => x !== region)) {
        others[`NATS_PASSWORD_${suffix(o)}`] = v(`${o}/nats/rollout`);
        others[`DATABASE_PASSWORD_${suffix(o)}`] = v(`${o}/postgres/pipeline_rollout`);
      }
      return { ...own, ...others };
    }
  }
}

/**
 * What the install script reads on stdin (`captcha-pipeline-install credentials <app>`): one
 * `<name> <base64 of the value>` line per credential. Never on a command line.
 */
export function credentialPayload(files: Record<string, string>): string {
  return Object.entries(files)
    .map(([name, value]) => {
      if (!CREDENTIAL_NAME.test(name)) throw new Error(`credential name ${JSON.stringify(name)} is not a setting's`);
      return `${name} ${Buffer.from(value).toString("base64")}\n`;
    })
    .join("");
}

/** Adds what the catalog has and the store lacks (a new region, a new kind of secret); never changes a value. */
export function fillStore(store: StoreFile, at: string): string[] {
  const added: string[] = [];
  for (const s of catalog(store.regions))
    if (!store.secrets[s.name]) {
      store.secrets[s.name] = { value: s.generate(), createdAt: at };
      added.push(s.name);
    }
  return added;
}

/** Rolls `name`: a new value, the one before kept as `previous` (what a two-value secret still honours). */
export function rotateEntry(store: StoreFile, name: string, at: string, o: { force?: boolean } = {}): SecretSpec {
  const spec = specOf(store.regions, name);
  if (spec.noRotate && !o.force) throw new Error(`${name} is not rotated: ${spec.noRotate}`);
  const cur = store.secrets[name];
  store.secrets[name] = {
    value: spec.generate(),
    createdAt: at,
    ...(cur ? { previous: { value: cur.value, retiredAt: at } } : {}),
  };
  return spec;
}
