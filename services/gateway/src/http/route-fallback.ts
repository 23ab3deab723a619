import type { Middleware } from "koa";
import type Router from "@koa/router";
import { Errors } from "@exportsvc/common";

/**
 * Runs after the router: a path no route knows is a plain 404 NOT_FOUND; a known path with another
 * method is a 405 with Allow (OPTIONS answers 204 with Allow).
 */
export function routeFallbackMiddleware(routers: Router[]): Middleware {
  return async (ctx, next) => {
    await next();
    const matches = routers.map((router) => router.match(ctx.path, ctx.method));
    if (matches.some((match) => match.route)) return;
    const allowed = new Set<string>();
    for (const match of matches) {
      for (const layer of match.path) for (const method of layer.methods) allowed.add(method);
    }
    if (allowed.size === 0) throw Errors.routeNotFound();
    allowed.add("OPTIONS");
    const allow = [...allowed].sort();
    if (ctx.method === "OPTIONS") {
      ctx.status = 204;
      ctx.set("Allow", allow.join(", "));
      return;
    }
    throw Errors.methodNotAllowed(allow);
  };
}
