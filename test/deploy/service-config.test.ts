import { readFileSync } from "node:fs";
import type { z } from "zod";
import { catalogConfigSchema, loadCatalogConfig } from "../../services/catalog/src/config";
import { exportConfigSchema, loadExportConfig } from "../../services/export/src/config";
import { gatewayConfigSchema, loadGatewayConfig } from "../../services/gateway/src/config";
import { loadSchemaConfig, schemaConfigSchema } from "../../services/schema/src/config";
import { containerEnvironment } from "../../scripts/lib/chart";
import { kubectlKustomize, repoPath } from "./kustomize";

/**
 * The environment the deployment gives each service (its ConfigMap plus its Secret references,
 * as in k8s/base, which equals the chart's default render) must be accepted by the service's own
 * configuration parser, and every variable set must be one the service reads: a misspelt or
 * renamed variable would otherwise be silently ignored.
 */
const SECRET_VALUES: Record<string, string> = {
  DATABASE_URL: "postgres://exports:pw@db.internal:5432/exports",
  REDIS_URL: "redis://redis.internal:6379",
  DATABASE_READ_URL: "postgres://exports:pw@db-standby.internal:5432/exports",
  KEY_HASH_SECRET: "pepper-pepper-pepper",
  CURSOR_KEYS: "1:0123456789abcdef0123456789abcdef",
};

const SERVICES: Record<string, { schema: z.ZodObject<z.ZodRawShape>; load: (env: Record<string, string>) => unknown }> = {
  gateway: { schema: gatewayConfigSchema as unknown as z.ZodObject<z.ZodRawShape>, load: loadGatewayConfig },
  catalog: { schema: catalogConfigSchema as unknown as z.ZodObject<z.ZodRawShape>, load: loadCatalogConfig },
  export: { schema: exportConfigSchema as unknown as z.ZodObject<z.ZodRawShape>, load: loadExportConfig },
  schema: { schema: schemaConfigSchema as unknown as z.ZodObject<z.ZodRawShape>, load: loadSchemaConfig },
};

/** Alternative names of one setting; a service must read at least one name of a pair it is given. */
const ALIASES: string[][] = [];

const objects = kubectlKustomize(repoPath("k8s", "base"));

const environmentOf = (component: string) => containerEnvironment(objects, component, SECRET_VALUES);

describe.each(Object.keys(SERVICES))("%s", (component) => {
  const { schema, load } = SERVICES[component];
  const env = environmentOf(component);
  const reads = new Set(Object.keys(schema.shape));

  it("starts with the environment the deployment gives it", () => {
    expect(() => load(env)).not.toThrow();
  });

  it("reads every variable the deployment sets (OTEL_* are read by the SDK)", () => {
    const unread = Object.keys(env).filter((variable) => {
      if (variable.startsWith("OTEL_") || reads.has(variable)) return false;
      const pair = ALIASES.find((names) => names.includes(variable));
      // An alias is fine when the service reads the other name of the pair.
      return pair ? !pair.some((name) => reads.has(name)) : true;
    });
    expect(unread).toEqual([]);
  });

  it("is given every variable it requires", () => {
    const required = Object.entries(schema.shape)
      .filter(([, field]) => !(field as z.ZodTypeAny).safeParse(undefined).success)
      .map(([name]) => name);
    expect(required.filter((name) => !(name in env))).toEqual([]);
  });
});

/**
 * Pool sizes and concurrency defaults: the service's own default (its parser given only the
 * secrets), the chart's default render (k8s/base) and the README's table state the same number.
 */
const SIZING: Record<string, string[]> = {
  gateway: ["DATABASE_POOL_MAX"],
  catalog: ["DATABASE_POOL_MAX"],
  export: ["DATABASE_POOL_MAX"],
  schema: ["DATABASE_POOL_MAX", "REGISTRY_SYNC_CONCURRENCY", "FORM_MAINTENANCE_CONCURRENCY", "FORM_REBUILD_PARALLELISM"],
};

/** The default the README's configuration table states for `variable` of `component`. */
function readmeDefault(readme: string, component: string, variable: string): number | undefined {
  const row = readme.split("\n").find((line) => line.startsWith(`| \`${variable}\` |`));
  const cell = row?.split("|")[3]?.trim();
  if (cell === undefined) return undefined;
  // "gateway 10, catalog 10, export 16, schema 5" or a single leading number.
  const own = new RegExp(`\\b${component} (\\d+)`).exec(cell) ?? /^(\d+)/.exec(cell);
  return own ? Number(own[1]) : undefined;
}

describe("pool sizes and concurrency defaults agree across the services, the chart and the README", () => {
  const readme = readFileSync(repoPath("README.md"), "utf8");
  const cases = Object.entries(SIZING).flatMap(([component, variables]) => variables.map((variable) => ({ component, variable })));
  it.each(cases)("$component $variable", ({ component, variable }) => {
    const serviceDefault = (SERVICES[component].load(SECRET_VALUES) as Record<string, unknown>)[variable];
    const chart = Number(environmentOf(component)[variable]);
    expect({ chart, readme: readmeDefault(readme, component, variable) }).toEqual({ chart: serviceDefault, readme: serviceDefault });
  });
});
