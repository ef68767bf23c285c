// A TCP relay between two regions' processes on one machine: optional one-way delay per chunk
// (this kernel has no netem), and a cut that drops every connection and refuses new ones until
// healed: what a partitioned link does to a NATS leafnode or witness connection.
import { createServer, type Server, Socket } from "node:net";

export interface Relay {
  port: number;
  cut(): void;
  heal(): void;
  stop(): Promise<void>;
}

export async function startRelay(
  target: { host: string; port: number },
  o: { delayMs?: number; listenHost?: string } = {},
): Promise<Relay> {
  const sockets = new Set<Socket>();
  let isCut = false;
  const delayed = (to: Socket) => (chunk: Buffer) => {
    if (!o.delayMs) return void to.write(chunk);
    setTimeout(() => !to.destroyed && to.write(chunk), o.delayMs);
  };
  const server: Server = createServer((client) => {
    if (isCut) return void client.destroy();
    const upstream = new Socket();
    sockets.add(client);
    sockets.add(upstream);
    const close = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("data", delayed(upstream));
    upstream.on("data", delayed(client));
    client.on("error", close).on("close", close);
    upstream.on("error", close).on("close", close);
    upstream.connect(target.port, target.host);
  });
  await new Promise<void>((r) => server.listen(0, o.listenHost ?? "127.0.0.1", r));
  const addr = server.address();
  const cut = () => {
    isCut = true;
    for (const s of sockets) s.destroy();
    sockets.clear();
  };
  return {
    port: typeof addr === "object" && addr ? addr.port : 0,
    cut,
    heal() {
      isCut = false;
    },
    async stop() {
      cut();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
