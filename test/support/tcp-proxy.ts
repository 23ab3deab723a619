import { createServer, connect, type Server, type Socket } from "node:net";

/**
 * A TCP proxy for failure injection (in front of PostgreSQL, or between two services): `cut()` drops
 * every connection and refuses new ones (the peer "goes away"); `restore()` lets connections through
 * again; `setLatency(ms)` delays every chunk in both directions by that much (order kept).
 */
export interface TcpProxy {
  port: number;
  cut(): void;
  restore(): void;
  setLatency(ms: number): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  let open = true;
  let latencyMs = 0;
  /** Forwards chunks, each delivered latencyMs after it arrived and never before the one ahead of it. */
  const forward = (from: Socket, to: Socket) => {
    let lastDelivery = 0;
    from.on("data", (chunk: Buffer) => {
      if (latencyMs <= 0 && lastDelivery <= Date.now()) {
        to.write(chunk);
        return;
      }
      lastDelivery = Math.max(Date.now() + latencyMs, lastDelivery);
      setTimeout(() => {
        if (!to.destroyed) to.write(chunk);
      }, lastDelivery - Date.now());
    });
  };
  const server: Server = createServer((client) => {
    if (!open) {
      client.destroy();
      return;
    }
    const upstream = connect(targetPort, targetHost);
    sockets.add(client);
    sockets.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    forward(client, upstream);
    forward(upstream, client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    port,
    cut() {
      open = false;
      for (const s of sockets) s.destroy();
      sockets.clear();
    },
    restore() {
      open = true;
    },
    setLatency(ms: number) {
      latencyMs = ms;
    },
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** The same database URL, but through the proxy. */
export function viaProxy(databaseUrl: string, proxy: TcpProxy): string {
  const url = new URL(databaseUrl);
  url.hostname = "127.0.0.1";
  url.port = String(proxy.port);
  return url.toString();
}
