/**
 * The stack from its own images (`npm run images:test`, after `npm run images`): the migrations
 * Job's command, the four services as containers configured like the chart configures them, and
 * a smoke subset of the conformance suite against the gateway container: the listing, a full
 * export of every demo dataset, errors, a 429, /build naming the image tag and commit. Then the
 * gateway is stopped mid-stream (SIGTERM to node as PID 1): the stream finishes, the process exits 0.
 * Not part of `npm test` (it needs podman and the images); .ci/run runs it as its own step.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import type { Pool } from "pg";
import { generateApiKey, hashApiKeySecret } from "@exportsvc/common";
import { createPool } from "@exportsvc/db";
import { seedDemo } from "@exportsvc/exportctl";
import { parseCsvPage } from "../../support/csv";
import { problem } from "../../conformance/helpers";
import { containerEnvironment, DEFAULT_VALUE_ARGS, helmTemplate } from "../../../scripts/lib/chart";
import { kubeTool } from "../../../scripts/tools/kube-tools";
import {
  chartEnvironment,
  COMPONENTS,
  migrationsJob,
  podman,
  podmanOk,
  renderChartForStack,
  startContainerStack,
  terminationGraceSeconds,
  type ContainerStack,
  type StackRender,
} from "./podman-stack";

interface ListedDataset {
  key: string;
  columns: Array<{ key: string }>;
  links: { csv: string };
}

/** Rows of the large dataset of the "wide" organization: several pages of MB, so a stream stays in flight. */
const WIDE_ROWS = 6000;
const WIDE_LIMIT = 5000;

describe("the containers' environment", () => {
  const ports = { gateway: 1001, grpc: { schema: 1002, catalog: 1003, export: 1004 }, metrics: { schema: 1005, catalog: 1006, export: 1007, gateway: 1008 } };
  const secrets = { DATABASE_URL: "postgres://x", REDIS_URL: "redis://x", KEY_HASH_SECRET: "k", CURSOR_KEYS: "1:c" };
  const PORT_VARIABLES = ["PORT", "GRPC_PORT", "METRICS_PORT", "CATALOG_ADDRESS", "EXPORT_ADDRESS", "SCHEMA_ADDRESS"];
  let render: StackRender;
  let defaults: ReturnType<typeof helmTemplate>;

  beforeAll(async () => {
    const helm = await kubeTool("helm");
    render = renderChartForStack(helm, ports);
    defaults = helmTemplate(helm, DEFAULT_VALUE_ARGS);
  }, 120_000);

  it("is the chart's default environment but for the listening ports and the addresses built from them", () => {
    for (const c of COMPONENTS) {
      const env = chartEnvironment(render, c, secrets);
      const expected = containerEnvironment(defaults, c, secrets);
      const withoutPorts = (e: Record<string, string>) => Object.fromEntries(Object.entries(e).filter(([k]) => !PORT_VARIABLES.includes(k)));
      expect(Object.keys(expected).length).toBeGreaterThan(10);
      expect(withoutPorts(env)).toEqual(withoutPorts(expected));
      expect(Object.keys(env).sort()).toEqual(Object.keys(expected).sort());
      expect(env.METRICS_PORT).toBe(String(ports.metrics[c]));
      if (c === "gateway") expect(env.PORT).toBe(String(ports.gateway));
      else expect(env.GRPC_PORT).toBe(String(ports.grpc[c]));
    }
    const gateway = chartEnvironment(render, "gateway", secrets);
    expect([gateway.CATALOG_ADDRESS, gateway.EXPORT_ADDRESS]).toEqual(["dataset-export-catalog:1003", "dataset-export-export:1004"]);
    expect(chartEnvironment(render, "export", secrets).SCHEMA_ADDRESS).toBe("dataset-export-schema:1002");
    expect(gateway.KEY_HASH_SECRET).toBe("k");
    expect(chartEnvironment(render, "export", secrets).CURSOR_KEYS).toBe("1:c");
  });

  it("gives the migrations Job the chart's command, log level and the run's database", () => {
    const job = migrationsJob(render, "postgres://run");
    expect(job.command).toEqual(["node", "dist/exportctl.js", "migrate"]);
    expect(job.env).toEqual({ LOG_LEVEL: "info", DATABASE_URL: "postgres://run" });
  });
});

describe("the stack from its images", () => {
  let stack: ContainerStack;
  let pool: Pool;
  let demoKey: string;
  let wideKey: string;

  beforeAll(async () => {
    stack = await startContainerStack(async (databaseUrl, keyHashSecret) => {
      pool = createPool({ connectionString: databaseUrl, max: 2 });
      const demo = await seedDemo(pool, { keyHashSecret });
      demoKey = demo.secret!;
      const wide = "0b0e57a1-0000-4000-8000-00000000d17e";
      await pool.query("INSERT INTO organizations (id, name) VALUES ($1, 'Wide rows')", [wide]);
      await pool.query("INSERT INTO export_organizations (organization_id, export_enabled) VALUES ($1, true)", [wide]);
      await pool.query(
        "INSERT INTO suppliers (organization_id, id, name) SELECT $1, gen_random_uuid(), 'supplier ' || g || ' ' || repeat('w', 5000) FROM generate_series(1, $2::int) g",
        [wide, WIDE_ROWS],
      );
      const key = generateApiKey();
      await pool.query("INSERT INTO api_keys (id, organization_id, secret_hash, description) VALUES ($1, $2, $3, 'wide')", [
        key.id,
        wide,
        hashApiKeySecret(key.secret, keyHashSecret),
      ]);
      wideKey = key.secret;
    });
  }, 240_000);

  afterAll(async () => {
    await stack?.stop();
    await pool?.end();
  }, 180_000);

  const get = (path: string, key = demoKey, init: RequestInit = {}) =>
    fetch(`${stack.baseUrl}${path}`, { ...init, headers: { ...(init.headers as Record<string, string> | undefined), Authorization: `Bearer ${key}` } });

  async function listing(key = demoKey): Promise<ListedDataset[]> {
    const res = await get("/v1/datasets", key);
    expect(res.status).toBe(200);
    return (await res.json()) as ListedDataset[];
  }

  async function pageToEnd(ds: ListedDataset, limit: number) {
    const rows: Record<string, string>[] = [];
    let cursor: string | undefined;
    for (let pages = 0; ; pages++) {
      const qs = new URLSearchParams({ limit: String(limit) });
      if (cursor) qs.set("cursor", cursor);
      const res = await get(`${ds.links.csv}?${qs}`);
      const body = Buffer.from(await res.arrayBuffer());
      if (res.status !== 200) throw new Error(`${ds.key}: HTTP ${res.status} ${body.toString().slice(0, 500)}`);
      const page = parseCsvPage(body);
      expect(page.header).toEqual(ds.columns.map((c) => c.key));
      rows.push(...page.rows);
      if (page.rows.length < limit) return rows;
      cursor = page.rows[page.rows.length - 1]._cursor;
      if (pages > 1000) throw new Error(`${ds.key}: paging did not end`);
    }
  }

  it("the migrations Job's command applied every migration from the image; a second run changes nothing", async () => {
    const files = readdirSync(join(__dirname, "..", "..", "..", "packages", "db", "migrations")).filter((f) => f.endsWith(".sql"));
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) expect(stack.migrateOutput).toContain(file.replace(/\.sql$/, ""));
    const job = migrationsJob(stack.render, stack.databaseUrl);
    const again = await stack.runOnce(stack.images.image(stack.values.migrations.imageService), job.command, job.env);
    expect({ code: again.code, out: again.stdout.trim() }).toEqual({ code: 0, out: "database is up to date" });
  });

  it("GET /build names the image tag and the commit the images were built from; build_info says the same", async () => {
    const res = await fetch(`${stack.baseUrl}/build`);
    expect(res.status).toBe(200);
    const build = (await res.json()) as Record<string, string>;
    expect(build).toMatchObject({ imageTag: stack.images.tag, commit: stack.images.commit });
    expect(new Date(build.buildDate).toISOString()).toBe(build.buildDate.replace(/Z$/, ".000Z"));
    const metrics = await (await fetch(stack.metricsUrl("gateway"))).text();
    expect(metrics).toMatch(new RegExp(`^build_info\\{[^}]*image_tag="${stack.images.tag}"[^}]*\\} 1$`, "m"));
    expect(metrics).toContain(`commit="${stack.images.commit}"`);
  });

  it("lists the demo organization's datasets", async () => {
    const keys = (await listing()).map((d) => d.key);
    for (const k of ["resources_suppliers", "resources_products", "resources_lots", "deviations"]) expect(keys).toContain(k);
  });

  it("exports every demo dataset to the end, identically at two page sizes", async () => {
    const datasets = await listing();
    let total = 0;
    for (const ds of datasets) {
      const full = await pageToEnd(ds, 5000);
      const paged = await pageToEnd(ds, 7);
      expect({ ds: ds.key, ids: paged.map((r) => r._cursor.length > 0 && (r.id ?? r._cursor)) }).toEqual({
        ds: ds.key,
        ids: full.map((r) => r._cursor.length > 0 && (r.id ?? r._cursor)),
      });
      total += full.length;
    }
    expect(datasets.length).toBeGreaterThan(10);
    expect(total).toBeGreaterThan(50);
  }, 180_000);

  it("answers errors as problem+json: unknown dataset 404, a bad limit 400, no key 401", async () => {
    expect((await problem(await get("/v1/datasets/no_such_dataset/csv"), 404)).errorCode).toBe("DATASET_NOT_FOUND");
    expect((await problem(await get("/v1/datasets/resources_suppliers/csv?limit=5001"), 400)).errorCode).toBe("INVALID_PARAMETER");
    expect((await problem(await fetch(`${stack.baseUrl}/v1/datasets`), 401)).errorCode).toBe("UNAUTHORIZED");
  });

  it("answers 429 when an organization has more requests in flight than the chart's concurrency limit", async () => {
    await waitForDataset(wideKey, "resources_suppliers");
    const limit = Number(stack.values.gateway.rateLimit.concurrency);
    const held: Response[] = [];
    const readers: ReadableStreamDefaultReader<Uint8Array>[] = [];
    try {
      // Streams of several MB that are not read stay in flight. Uncompressed: fetch asks for gzip by
      // default, and these rows (one letter repeated) shrink to a size every buffer on the way holds,
      // so the streams ended at once and the 6th request raced them.
      for (let i = 0; i < limit; i++) {
        const res = await get(`/v1/datasets/resources_suppliers/csv?limit=${WIDE_LIMIT}`, wideKey, { headers: { "Accept-Encoding": "identity" } });
        expect(res.status).toBe(200);
        held.push(res);
      }
      const rejected = await get("/v1/datasets/resources_suppliers/csv?limit=1", wideKey);
      if (rejected.status !== 429) {
        const states = await Promise.all(
          held.map(async (r) => {
            const reader = r.body!.getReader();
            readers.push(reader);
            let bytes = 0;
            const t = Date.now();
            for (;;) {
              const next = await Promise.race([reader.read(), new Promise<"slow">((res) => setTimeout(() => res("slow"), 3000))]);
              if (next === "slow") return `in flight after ${bytes} bytes`;
              if (next.done) return `ended after ${bytes} bytes (${Date.now() - t} ms)`;
              bytes += next.value.length;
            }
          }),
        );
        throw new Error(`6th request got ${rejected.status}; held streams: ${states.join("; ")}\n${(await stack.logs("gateway")).slice(-3000)}`);
      }
      const body = await problem(rejected, 429);
      expect(body.errorCode).toBe("RATE_LIMITED");
      expect(rejected.headers.get("ratelimit-limit")).toBe(String(limit));
      expect(Number(rejected.headers.get("retry-after"))).toBeGreaterThan(0);
    } finally {
      await Promise.all(held.filter((r) => !r.body?.locked).map((r) => r.body?.cancel()));
      await Promise.all(readers.map((r) => r.cancel().catch(() => undefined)));
    }
    // Cancelled streams give their slots back.
    await eventually(async () => (await get("/v1/datasets/resources_suppliers/csv?limit=1", wideKey)).status === 200);
  }, 120_000);

  it("drains a stream in flight when the gateway container is stopped (SIGTERM to node as PID 1), then exits 0", async () => {
    expect((await podmanOk(["exec", stack.containers.gateway, "cat", "/proc/1/cmdline"])).split("\0")[0]).toBe("node");
    // Uncompressed, so the page stays in flight (see the 429 test).
    const res = await get(`/v1/datasets/resources_suppliers/csv?limit=${WIDE_LIMIT}`, wideKey, { headers: { "Accept-Encoding": "identity" } });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const chunks: Buffer[] = [Buffer.from((await reader.read()).value!)];

    const grace = terminationGraceSeconds(stack.render, "gateway");
    let stopped = false;
    const stopping = podman(["stop", "--time", String(grace), stack.containers.gateway], { timeoutMs: (grace + 30) * 1000 }).finally(() => {
      stopped = true;
    });
    // The listener closes at once: new connections are refused while the stream goes on.
    await eventually(async () => {
      try {
        await fetch(`${stack.baseUrl}/health`, { signal: AbortSignal.timeout(2000) });
        return false;
      } catch {
        return true;
      }
    });
    // Still draining: the process waits for the page in flight (which this client has barely read).
    expect(stopped).toBe(false);
    expect(chunks.reduce((n, c) => n + c.length, 0)).toBeLessThan(WIDE_ROWS * 5000 * 0.5);
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(Buffer.from(value));
    }
    const page = parseCsvPage(Buffer.concat(chunks));
    expect(page.rows.length).toBe(WIDE_LIMIT);
    expect(page.rows[WIDE_LIMIT - 1]._cursor).toMatch(/^[A-Za-z0-9+/=]+$/);

    expect((await stopping).code).toBe(0);
    const state = (await podmanOk(["inspect", "--format", "{{.State.ExitCode}} {{.State.OOMKilled}}", stack.containers.gateway])).trim();
    expect(state).toBe("0 false");
    // Within the pod's termination grace period: exit code 0, never SIGKILLed (that would be 137).
    const logs = await stack.logs("gateway");
    expect(logs).toContain("gateway stopped");
    // It stopped when the page ended, not when SHUTDOWN_GRACE_MS ran out: the client's spare
    // connections (undici opens some that never send a byte) did not hold it.
    expect(logs).not.toContain("shutdown grace period over");
  }, 120_000);

  it.each(COMPONENTS.filter((c) => c !== "gateway"))("%s stops on SIGTERM within its grace period and exits 0", async (component) => {
    const grace = terminationGraceSeconds(stack.render, component);
    expect((await podman(["stop", "--time", String(grace), stack.containers[component]], { timeoutMs: (grace + 30) * 1000 })).code).toBe(0);
    // Exit code 0: it stopped by itself within the grace period (podman's SIGKILL after it gives 137).
    expect((await podmanOk(["inspect", "--format", "{{.State.ExitCode}} {{.State.OOMKilled}}", stack.containers[component]])).trim()).toBe("0 false");
  }, 120_000);

  async function waitForDataset(key: string, dataset: string) {
    await eventually(async () => (await listing(key)).some((d) => d.key === dataset));
  }
});

async function eventually(check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
