import { createEmulator, type Emulator } from "../emulator.ts";
import type { EmulatorOptions } from "../settings.ts";

/** One HTTP reply as a test sees it. */
export interface Reply {
  status: number;
  body: string;
  contentType: string | null;
  headers: Headers;
}

/** A started emulator plus helpers that speak the protocol over real HTTP. */
export interface Harness {
  emulator: Emulator;
  url: string;
  /** GET `path` with `params` in the query string. */
  get(path: string, params?: Record<string, string>): Promise<Reply>;
  /** POST `path` with a urlencoded, multipart or JSON body. */
  post(path: string, body: URLSearchParams | FormData | Record<string, unknown>): Promise<Reply>;
  /** Submits through in.php (GET) and returns the provider id; throws unless the reply is `OK|<id>`. */
  submit(params: Record<string, string>): Promise<string>;
  stop(): Promise<void>;
}

async function toReply(res: Response): Promise<Reply> {
  return {
    status: res.status,
    body: await res.text(),
    contentType: res.headers.get("content-type"),
    headers: res.headers,
  };
}

/** Starts an emulator on 127.0.0.1 and a random port (test key `test-key`, 10 threads, unless given). */
export async function startEmulator(opts: EmulatorOptions = {}): Promise<Harness> {
  const emulator = createEmulator({ keys: { "test-key": { threads: 10 } }, ...opts, host: "127.0.0.1", port: 0 });
  const { url } = await emulator.start();
  const get: Harness["get"] = async (path, params = {}) =>
    toReply(await fetch(`${url}${path}?${new URLSearchParams(params)}`));
  const post: Harness["post"] = async (path, body) => {
    if (body instanceof URLSearchParams || body instanceof FormData) {
      return toReply(await fetch(`${url}${path}`, { method: "POST", body }));
    }
    return toReply(
      await fetch(`${url}${path}`, {
        method: "POST",
        body: JSON.stringify(body),
        headers: { "content-type": "application/json" },
      }),
    );
  };
  return {
    emulator,
    url,
    get,
    post,
    async submit(params) {
      const r = await get("/in.php", params);
      const m = /^OK\|(\d+)$/.exec(r.body);
      if (!m) throw new Error(`submission refused: ${r.body}`);
      return m[1]!;
    },
    stop: () => emulator.stop(),
  };
}

/** A tiny valid PNG (1x1), for image tasks. */
export const PNG_1X1 = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=",
  "base64",
);
