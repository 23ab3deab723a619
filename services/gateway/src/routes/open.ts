import Router from "@koa/router";
import { AppError, Errors } from "@exportsvc/common";
import type { OpenApiDocument } from "../openapi/document";

export interface BuildInfo {
  imageTag: string;
  commit: string;
  buildDate: string;
  version: string;
}

/** Probes the gateway's own database only (never the datasets' datastore). Rejects when unhealthy. */
export type DatabaseProbe = () => Promise<void>;

/** Endpoints that need no key: liveness, readiness, build, OpenAPI description. */
export function openRoutes(deps: { build: BuildInfo; probeDatabase: DatabaseProbe; openApi: OpenApiDocument }): Router {
  const router = new Router();
  const openApiJson = JSON.stringify(deps.openApi);

  router.get("/health", (ctx) => {
    ctx.set("Cache-Control", "no-store");
    ctx.body = { status: "ok" };
  });

  router.get("/health/ready", async (ctx) => {
    ctx.set("Cache-Control", "no-store");
    try {
      await deps.probeDatabase();
    } catch {
      const unavailable = Errors.databaseUnavailable("The gateway's database did not answer the readiness probe.");
      throw new AppError({ ...unavailable.toFields(), extensions: { checks: { database: "unavailable" } } });
    }
    ctx.body = { status: "ready", checks: { database: "ok" } };
  });

  router.get("/build", (ctx) => {
    ctx.body = {
      imageTag: deps.build.imageTag,
      commit: deps.build.commit,
      buildDate: deps.build.buildDate,
      version: deps.build.version,
    };
  });

  router.get("/swagger/v1/swagger.json", (ctx) => {
    ctx.type = "application/json; charset=utf-8";
    ctx.body = openApiJson;
  });

  return router;
}
