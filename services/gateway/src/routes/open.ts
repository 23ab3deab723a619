import Router from "@koa/router";
import { AppError, Errors, type BuildIdentity } from "@exportsvc/common";
import type { OpenApiDocument } from "../openapi/document";
import { REDOC_SCRIPT_PATH, REFERENCE_PAGE_CSP, REFERENCE_PAGE_PATH, redocStandaloneScript, referencePageHtml } from "../openapi/reference-page";

/** Probes the gateway's own database only (never the datasets' datastore). Rejects when unhealthy. */
export type DatabaseProbe = () => Promise<void>;

const OPENAPI_PATH = "/swagger/v1/swagger.json";

/** Endpoints that need no key: liveness, readiness, build, OpenAPI description and its reference page. */
export function openRoutes(deps: { build: BuildIdentity; probeDatabase: DatabaseProbe; openApi: OpenApiDocument }): Router {
  // Paths are matched exactly as written: /HEALTH is no endpoint (404 NOT_FOUND).
  const router = new Router({ sensitive: true });
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

  router.get(OPENAPI_PATH, (ctx) => {
    ctx.type = "application/json; charset=utf-8";
    ctx.body = openApiJson;
  });

  const title = String((deps.openApi.info as { title?: string } | undefined)?.title ?? "API reference");
  const referencePage = referencePageHtml(OPENAPI_PATH, title);
  router.get(REFERENCE_PAGE_PATH, (ctx) => {
    ctx.type = "text/html; charset=utf-8";
    ctx.set("Content-Security-Policy", REFERENCE_PAGE_CSP);
    ctx.set("Cache-Control", "no-cache");
    ctx.body = referencePage;
  });

  router.get(REDOC_SCRIPT_PATH, (ctx) => {
    ctx.type = "application/javascript; charset=utf-8";
    ctx.set("Cache-Control", "public, max-age=3600");
    ctx.body = redocStandaloneScript();
  });

  return router;
}
