import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Ajv from "ajv";
import { parse } from "yaml";
import { CHART_README, ChartReadmeError, generateChartReadme } from "../../scripts/chart-readme";
import { kubectlKustomize, repoPath } from "./kustomize";

/**
 * The chart checked without running helm (helm-render.test.ts runs it): values against
 * values.schema.json, every value a template reads exists, template blocks are balanced, and each
 * value lands in the variable it documents in the default render (k8s/base, generated from the
 * chart by `npm run k8s:render`).
 */
const CHART = repoPath("charts", "dataset-export");
const COMPONENTS = ["gateway", "catalog", "export", "schema"] as const;
const read = (...p: string[]) => readFileSync(join(CHART, ...p), "utf8");
const values = parse(read("values.yaml")) as Record<string, any>;
const schema = JSON.parse(read("values.schema.json"));
const templateFiles = readdirSync(join(CHART, "templates")).filter((f) => f.endsWith(".yaml") || f.endsWith(".tpl") || f.endsWith(".txt"));
const templates = Object.fromEntries(templateFiles.map((f) => [f, read("templates", f)]));
const allTemplateText = Object.values(templates).join("\n");

const validate = new Ajv({ allErrors: true, strict: false }).compile(schema);

function deepMerge(base: any, override: any): any {
  if (override === null || typeof override !== "object" || Array.isArray(override)) return override;
  const out = { ...(base ?? {}) };
  for (const [k, v] of Object.entries(override)) out[k] = deepMerge(out[k], v);
  return out;
}

const at = (root: any, path: string[]): unknown => path.reduce((node, key) => (node === undefined || node === null ? undefined : node[key]), root);
const has = (root: any, path: string[]) => {
  const parent = at(root, path.slice(0, -1));
  return parent !== null && typeof parent === "object" && path[path.length - 1] in (parent as object);
};

describe("values", () => {
  it("values.yaml validates against values.schema.json", () => {
    const ok = validate(values);
    expect(validate.errors ?? []).toEqual([]);
    expect(ok).toBe(true);
  });

  it("the production example, merged over the defaults as helm does, validates too", () => {
    const production = parse(read("ci", "production-values.yaml"));
    const merged = deepMerge(values, production);
    expect(validate(merged) ? [] : validate.errors).toEqual([]);
    expect(merged.secrets.existingSecret).toBe("dataset-export-secrets");
  });

  it("accepts inline secrets in the services' formats", () => {
    const inline = deepMerge(values, {
      secrets: {
        databaseUrl: "postgres://exports:pw@db.internal:5432/exports",
        redisUrl: "rediss://redis.internal:6380",
        databaseReadUrl: "postgres://exports:pw@db-standby.internal:5432/exports",
        keyHashSecret: "pepper",
        cursorKeys: "2:0123456789abcdef0123,1:fedcba9876543210fedc",
      },
    });
    expect(validate(inline) ? [] : validate.errors).toEqual([]);
  });

  it.each([
    ["a typo'd key", { gatway: {} }],
    ["a writable root filesystem", { securityContext: { readOnlyRootFilesystem: false } }],
    ["a non-numeric port", { gateway: { port: "http" } }],
    ["an unknown log level", { config: { logLevel: "verbose" } }],
    ["a malformed CURSOR_KEYS", { secrets: { cursorKeys: "no-colon-here" } }],
    ["a CURSOR_KEYS id that is not an integer", { secrets: { cursorKeys: "k1:0123456789abcdef0123" } }],
    ["a CURSOR_KEYS secret shorter than 16 characters", { secrets: { cursorKeys: "1:short" } }],
    ["a non-postgres DATABASE_URL", { secrets: { databaseUrl: "mysql://db/x" } }],
    ["a non-OTEL extra variable", { config: { otel: { extraEnv: { PATH: "/tmp" } } } }],
  ])("rejects %s", (_label, override) => {
    expect(validate(deepMerge(values, override))).toBe(false);
  });

  it("documents every service environment variable", () => {
    const text = read("values.yaml");
    for (const variable of [
      "DATABASE_URL",
      "REDIS_URL",
      "DATABASE_READ_URL",
      "KEY_HASH_SECRET",
      "CURSOR_KEYS",
      "PORT",
      "GRPC_PORT",
      "LOG_LEVEL",
      "SHUTDOWN_GRACE_MS",
      "RATE_LIMIT_CONCURRENCY",
      "RATE_LIMIT_PER_WINDOW",
      "RATE_LIMIT_WINDOW_SECONDS",
      "RATE_LIMIT_LEASE_SECONDS",
      "AUTH_SUCCESS_TTL_SECONDS",
      "AUTH_REJECTION_TTL_SECONDS",
      "HTTP_MAX_CONNECTIONS",
      "HTTP_HEADERS_TIMEOUT_MS",
      "HTTP_KEEP_ALIVE_TIMEOUT_MS",
      "REGISTRY_POLL_MS",
      "DATABASE_POOL_MAX",
      "METRICS_PORT",
      "OTEL_TRACES_EXPORTER",
      "OTEL_EXPORTER_OTLP_ENDPOINT",
    ]) {
      expect({ variable, documented: new RegExp(`\\b${variable}\\b`).test(text) }).toEqual({ variable, documented: true });
      expect({ variable, rendered: new RegExp(`\\b${variable}\\b`).test(allTemplateText) }).toEqual({ variable, rendered: true });
    }
    for (const variable of ["CATALOG_ADDRESS", "EXPORT_ADDRESS", "SCHEMA_ADDRESS"]) expect(allTemplateText).toContain(`${variable}:`);
  });
});

describe("README.md (Parameters generated from values.yaml by readme-generator-for-helm)", () => {
  const valuesText = read("values.yaml");
  /** `## @param <path> [modifiers] description` lines of values.yaml. */
  const params = [...valuesText.matchAll(/^\s*## @param (\S+)(?: \[([^\]]*)\])?/gm)].map((m) => ({ path: m[1], modifiers: m[2]?.split(",").map((x) => x.trim()) ?? [] }));

  it("is what `npm run chart:readme` writes (every value has a @param, else the generator fails)", () => {
    expect(params.length).toBeGreaterThan(100);
    expect(generateChartReadme() === readFileSync(CHART_README, "utf8") ? "current" : "stale: run npm run chart:readme").toBe("current");
  });

  it("fails, naming the key, for a value without a @param", () => {
    const dir = mkdtempSync(join(tmpdir(), "chart-values-"));
    writeFileSync(join(dir, "values.yaml"), `${valuesText}\nundocumentedKnob: 1\n`);
    expect(() => generateChartReadme(join(dir, "values.yaml"))).toThrow(ChartReadmeError);
    expect(() => generateChartReadme(join(dir, "values.yaml"))).toThrow(/Missing metadata for key: undocumentedKnob/);
    rmSync(dir, { recursive: true, force: true });
  });

  it("states defaults written into a @param (objects with dotted keys) as values.yaml has them", () => {
    const stated = params.flatMap(({ path, modifiers }) => modifiers.filter((m) => m.startsWith("default:")).map((m) => ({ path, m })));
    expect(stated.length).toBeGreaterThan(0);
    for (const { path, m } of stated) {
      expect({ path, value: JSON.parse(m.slice("default:".length)) }).toEqual({ path, value: at(values, path.split(".")) });
    }
  });

  it("documents only values that values.schema.json declares", () => {
    const resolve = (node: any) => (node?.$ref ? schema.definitions[node.$ref.replace("#/definitions/", "")] : node);
    /** Whether the schema declares the path: named properties, or a free-form object (no properties listed) above it. */
    const declared = (path: string[]): boolean => {
      let node = resolve(schema);
      for (const key of path) {
        if (!node) return false;
        if (!node.properties && node.additionalProperties !== false) return true;
        node = resolve(node.properties?.[key]);
      }
      return node !== undefined;
    };
    expect(declared(["gateway", "resources", "requests", "cpu"])).toBe(true);
    expect(declared(["gateway", "resources", "requests", "gpu"])).toBe(false);
    expect(params.filter(({ path }) => !declared(path.split("."))).map(({ path }) => path)).toEqual([]);
  });
});

describe("templates", () => {
  /** Template variables bound to a part of .Values. */
  const ALIASES: Record<string, string[][]> = {
    $v: [[]],
    $m: [["migrations"]],
    $ing: [["ingress"]],
    $otel: [["config", "otel"]],
    $s: [["secrets"]],
    $svc: COMPONENTS.map((c) => [c]),
  };

  it("read only values that values.yaml defines", () => {
    const missing: string[] = [];
    for (const [file, text] of Object.entries(templates)) {
      for (const m of text.matchAll(/\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)/g)) {
        const path = m[1].slice(1).split(".");
        if (!has(values, path)) missing.push(`${file}: .Values.${path.join(".")}`);
      }
      for (const m of text.matchAll(/(\$[a-z]+)((?:\.[A-Za-z_][A-Za-z0-9_]*)+)/g)) {
        const roots = ALIASES[m[1]];
        if (!roots) continue;
        const path = m[2].slice(1).split(".");
        // $svc is a component's values: the key must exist in at least one component (service-specific
        // keys such as gateway.port are read under a component check).
        if (!roots.some((root) => has(values, [...root, ...path]))) missing.push(`${file}: ${m[1]}.${path.join(".")}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it("found references in every template that reads values (the check above is not vacuous)", () => {
    const reading = Object.entries(templates).filter(([, t]) => /\.Values\.|\$svc\./.test(t)).map(([f]) => f);
    expect(reading).toEqual(expect.arrayContaining(["deployment.yaml", "configmap.yaml", "ingress.yaml", "migrations-job.yaml", "prometheusrule.yaml"]));
  });

  it.each(templateFiles)("%s has balanced actions and blocks", (file) => {
    const text = templates[file];
    expect(text.split("{{").length).toBe(text.split("}}").length);
    const actions = [...text.matchAll(/\{\{-?\s*(\/\*[\s\S]*?\*\/|[^}]*?)\s*-?\}\}/g)].map((m) => m[1].trim());
    let depth = 0;
    for (const action of actions) {
      if (/^(if|range|with|define)\b/.test(action)) depth++;
      if (/^end\b/.test(action)) depth--;
      expect(depth).toBeGreaterThanOrEqual(0);
    }
    expect(depth).toBe(0);
  });

  it("Chart.yaml is a v2 application chart named after its directory", () => {
    const chart = parse(read("Chart.yaml"));
    expect(chart).toMatchObject({ apiVersion: "v2", name: "dataset-export", type: "application" });
    expect(chart.version).toMatch(/^\d+\.\d+\.\d+/);
  });

  it("the alert rules are inserted unrendered and the dashboard file is the one the ConfigMap embeds", () => {
    expect(templates["prometheusrule.yaml"]).toContain('.Files.Get "rules/alerts.yaml"');
    expect(templates["prometheusrule.yaml"]).not.toMatch(/\btpl\b/);
    expect(templates["dashboard-configmap.yaml"]).toContain('.Files.Get "dashboards/dataset-export.json"');
  });
});

describe("the default render (k8s/base) carries each value into its variable", () => {
  const base = kubectlKustomize(repoPath("k8s", "base"));
  const configOf = (c: string) => base.find((o) => o.kind === "ConfigMap" && o.metadata.name === `dataset-export-${c}`)!.data as Record<string, string>;

  /** Value path -> (component, variable): what the chart's configmap.yaml renders from values.yaml. */
  const MAPPING: [string, string | "*", string][] = [
    ["config.logLevel", "*", "LOG_LEVEL"],
    ["config.metricsPort", "*", "METRICS_PORT"],
    ["config.otel.protocol", "*", "OTEL_EXPORTER_OTLP_PROTOCOL"],
    ["config.otel.sampler", "*", "OTEL_TRACES_SAMPLER"],
    ["config.otel.samplerArg", "*", "OTEL_TRACES_SAMPLER_ARG"],
    ["gateway.port", "gateway", "PORT"],
    ["gateway.rateLimit.concurrency", "gateway", "RATE_LIMIT_CONCURRENCY"],
    ["gateway.rateLimit.perWindow", "gateway", "RATE_LIMIT_PER_WINDOW"],
    ["gateway.rateLimit.windowSeconds", "gateway", "RATE_LIMIT_WINDOW_SECONDS"],
    ["gateway.rateLimit.leaseSeconds", "gateway", "RATE_LIMIT_LEASE_SECONDS"],
    ["gateway.auth.successTtlSeconds", "gateway", "AUTH_SUCCESS_TTL_SECONDS"],
    ["gateway.auth.rejectionTtlSeconds", "gateway", "AUTH_REJECTION_TTL_SECONDS"],
    ["gateway.http.maxConnections", "gateway", "HTTP_MAX_CONNECTIONS"],
    ["gateway.http.headersTimeoutMs", "gateway", "HTTP_HEADERS_TIMEOUT_MS"],
    ["gateway.http.keepAliveTimeoutMs", "gateway", "HTTP_KEEP_ALIVE_TIMEOUT_MS"],
    ["schema.registryPollMs", "schema", "REGISTRY_POLL_MS"],
    ["gateway.streamStallTimeoutMs", "gateway", "STREAM_STALL_TIMEOUT_MS"],
    ["export.streamStallTimeoutMs", "export", "STREAM_STALL_TIMEOUT_MS"],
    ["export.dbConnectionsPerOrganization", "export", "DATABASE_CONNECTIONS_PER_ORGANIZATION"],
    ...COMPONENTS.map((c) => [`${c}.shutdownGraceMs`, c, "SHUTDOWN_GRACE_MS"] as [string, string, string]),
    ...COMPONENTS.flatMap((c) => [
      [`${c}.dbPoolMax`, c, "DATABASE_POOL_MAX"] as [string, string, string],
    ]),
    ["schema.formDatasets.maintenance", "schema", "FORM_DATASETS_MAINTENANCE"],
    ["schema.formDatasets.pollMs", "schema", "FORM_DATASETS_POLL_MS"],
    ["schema.renderedDatasets.enabled", "schema", "RENDERED_DATASETS"],
    ["schema.renderedDatasets.intervalMs", "schema", "RENDERED_DATASETS_INTERVAL_MS"],
    ["schema.renderedDatasets.minRows", "schema", "RENDERED_DATASETS_MIN_ROWS"],
    ["schema.formDatasets.rebuildParallelism", "schema", "FORM_REBUILD_PARALLELISM"],
    ["schema.tombstoneRetentionDays", "schema", "TOMBSTONE_RETENTION_DAYS"],
    ["schema.formDatasets.concurrency", "schema", "FORM_MAINTENANCE_CONCURRENCY"],
    ["schema.registrySyncConcurrency", "schema", "REGISTRY_SYNC_CONCURRENCY"],
    ...(["catalog", "export", "schema"] as const).map((c) => [`${c}.grpcPort`, c, "GRPC_PORT"] as [string, string, string]),
  ];

  it.each(MAPPING)("%s -> %s %s", (path, component, variable) => {
    const expected = String(at(values, path.split(".")));
    for (const c of component === "*" ? COMPONENTS : [component]) {
      expect(templates["configmap.yaml"] + templates["_helpers.tpl"]).toContain(`${variable}:`);
      expect({ c, variable, value: configOf(c)[variable] }).toEqual({ c, variable, value: expected });
    }
  });

  it("the ingress limits and timeouts match", () => {
    const ingress = base.find((o) => o.kind === "Ingress")!;
    const annotations = ingress.metadata.annotations as Record<string, string>;
    expect(annotations["nginx.ingress.kubernetes.io/limit-rps"]).toBe(String(values.ingress.sourceIpLimits.rps));
    expect(annotations["nginx.ingress.kubernetes.io/limit-connections"]).toBe(String(values.ingress.sourceIpLimits.connections));
    expect(annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"]).toBe(String(values.ingress.proxyTimeoutSeconds));
    expect(templates["ingress.yaml"]).toContain("nginx.ingress.kubernetes.io/limit-rps");
  });

  it("the ingress speaks HTTP/1.1 to the gateway (chunked pages: a cut page is never relayed as complete)", () => {
    const ingress = base.find((o) => o.kind === "Ingress")!;
    const annotations = ingress.metadata.annotations as Record<string, string>;
    expect(annotations["nginx.ingress.kubernetes.io/proxy-http-version"]).toBe("1.1");
    expect(templates["ingress.yaml"]).toContain('nginx.ingress.kubernetes.io/proxy-http-version: "1.1"');
    // Opt-in: the client's protocol forwarded for the gateway's HTTP/1.0 refusal.
    expect(values.ingress.forwardClientHttpVersion).toBe(false);
    expect(templates["ingress.yaml"]).toContain("proxy_set_header X-Client-Http-Version $server_protocol;");
  });

  it("the export service's per-organization connections leave room for other organizations and match the gateway's concurrency", () => {
    expect(values.export.dbConnectionsPerOrganization).toBeLessThan(values.export.dbPoolMax);
    expect(values.export.dbConnectionsPerOrganization).toBe(values.gateway.rateLimit.concurrency);
  });
});
