import type { Middleware } from "koa";
import { Errors } from "@exportsvc/common";

/**
 * Request header a reverse proxy sets to the protocol its client spoke (ingress-nginx:
 * `proxy_set_header X-Client-Http-Version $server_protocol`). The proxy itself talks HTTP/1.1 to
 * the gateway, so without it a client's HTTP/1.0 would be invisible here. A client can only use it
 * to have its own request refused, never to be let through.
 */
export const CLIENT_HTTP_VERSION_HEADER = "x-client-http-version";

/** "HTTP/1.0", "1.0", "HTTP/0.9": versions without chunked transfer coding. */
const WITHOUT_CHUNKING = /^(?:HTTP\/)?(?:0\.9|1\.0)$/i;

/**
 * Streams (the CSV pages) need a framing that tells a cut body from a complete one: HTTP/1.1
 * chunking (no final chunk when aborted) or HTTP/2 (a reset stream). HTTP/1.0 has neither: an
 * aborted page would look like a short last page and end the client's paging loop with rows lost.
 * Runs before authentication: whoever the caller is, the answer could not be trusted.
 */
export function requireStreamFramingMiddleware(): Middleware {
  return async (ctx, next) => {
    const direct = `HTTP/${ctx.req.httpVersion}`;
    if (WITHOUT_CHUNKING.test(ctx.req.httpVersion)) throw Errors.httpVersionNotSupported(direct);
    const proxied = ctx.get(CLIENT_HTTP_VERSION_HEADER).trim();
    if (proxied && WITHOUT_CHUNKING.test(proxied)) throw Errors.httpVersionNotSupported(/^HTTP\//i.test(proxied) ? proxied.toUpperCase() : `HTTP/${proxied}`);
    await next();
  };
}
