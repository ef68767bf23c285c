// `bun infra/rehearsal/serve-artifacts.ts <dir> <host> <port>`: the host's file server on the
// rehearsal's bridge, the one download the hosts make at boot (the nats-server release tarball,
// which production fetches from GitHub). Read-only, files of <dir> only, no listing.
import { existsSync, statSync } from "node:fs";
import { basename, join } from "node:path";

const [dir, hostname, port] = Bun.argv.slice(2);
if (!dir || !hostname || !port) {
  console.error("usage: serve-artifacts.ts <dir> <host> <port>");
  process.exit(2);
}
const server = Bun.serve({
  hostname,
  port: Number(port),
  fetch(req) {
    const name = basename(decodeURIComponent(new URL(req.url).pathname));
    const file = join(dir, name);
    const ok = name && !name.startsWith(".") && existsSync(file) && statSync(file).isFile();
    console.log(
      JSON.stringify({ event: "artifact.get", name, status: ok ? 200 : 404, from: server.requestIP(req)?.address }),
    );
    return ok ? new Response(Bun.file(file)) : new Response("not found\n", { status: 404 });
  },
});
console.log(JSON.stringify({ event: "artifacts.started", url: server.url.href, dir }));
process.on("SIGTERM", () => {
  server.stop(true);
  process.exit(0);
});
