import type { Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { Logger, ServiceListener } from "@exportsvc/common";

/** How often, while draining, the connections that have turned idle are closed. */
const IDLE_SWEEP_MS = 200;

/**
 * The gateway's HTTP server as the lifecycle's listener (ServiceLifecycle of @exportsvc/common):
 * `listen` binds PORT on HOST and reports the URL; `drain` refuses new connections at once and gives
 * the streams in flight the grace period to finish their page, closing each connection as it turns
 * idle, then aborts what is left.
 */
export function httpListener(server: Server, address: { port: number; host: string }, logger: Logger): ServiceListener & { url(): string } {
  const closeSilentConnections = silentConnectionCloser(server);
  const url = () => serverUrl(server.address() as AddressInfo);
  return {
    url,
    listen: async () => {
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(address.port, address.host, () => {
          server.off("error", reject);
          resolve();
        });
      });
      return { url: url() };
    },
    drain: async (graceMs) => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      const closeIdle = () => {
        server.closeIdleConnections();
        closeSilentConnections();
      };
      closeIdle();
      const grace = new Promise<"timeout">((resolve) => setTimeout(() => resolve("timeout"), graceMs).unref());
      // A keep-alive connection whose stream just finished turns idle and would hold the close
      // until the grace period ends: close such connections as they turn idle.
      const idleSweep = setInterval(closeIdle, IDLE_SWEEP_MS);
      try {
        if ((await Promise.race([closed, grace])) === "timeout") {
          logger.warn("shutdown grace period over: aborting the requests still in flight");
          server.closeAllConnections();
          await closed;
        }
      } finally {
        clearInterval(idleSweep);
      }
    },
    abort: () => {
      if (server.listening) server.close();
      server.closeAllConnections();
    },
  };
}

/** The URL the server answers on; a wildcard address is reached on the loopback. */
function serverUrl(address: AddressInfo): string {
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return `http://${host === "0.0.0.0" || host === "[::]" ? "127.0.0.1" : host}:${address.port}`;
}

/**
 * Closes the connections that never sent a byte. Node's closeIdleConnections() leaves them open (it
 * only closes connections between requests), so a client's or a load balancer's spare connection
 * would hold a graceful stop until its grace period ends: undici opens such connections, and one held
 * a gateway container's stop for the whole 25 s. A connection that has sent part of a request is not
 * touched; the header timeout bounds it.
 */
function silentConnectionCloser(server: Server): () => void {
  const open = new Set<Socket>();
  server.on("connection", (socket: Socket) => {
    open.add(socket);
    socket.once("close", () => open.delete(socket));
  });
  return () => {
    for (const socket of open) if (socket.bytesRead === 0) socket.destroy();
  };
}
