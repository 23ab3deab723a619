// No node:http import here: config.ts loads this before tracing patches the HTTP modules.

/** The listener's protection against clients that hold connections without using them (docs/security.md). */
export interface HttpServerLimits {
  /** Connections held at once; a connection beyond is closed at once and counted. */
  maxConnections: number;
  /** Time a client gets to send a request's whole header section, from its first byte (a new connection: from connecting). */
  headersTimeoutMs: number;
  /** Time an idle keep-alive connection is kept after a response. */
  keepAliveTimeoutMs: number;
}

export const DEFAULT_HTTP_LIMITS: HttpServerLimits = {
  maxConnections: 10_000,
  headersTimeoutMs: 10_000,
  // Longer than the 60 s upstream keep-alive of ingress-nginx and cloud load balancers: a shorter
  // one races their reuse of an idle connection and shows as spurious 502s.
  keepAliveTimeoutMs: 65_000,
};
