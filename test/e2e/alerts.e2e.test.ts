/**
 * Every alert of the chart fires for real: a real Prometheus (Debian's `prometheus` package) scrapes
 * the four services of a stack of their own (a throwaway embedded PostgreSQL, a throwaway
 * redis-server, the gateway's key store behind a TCP proxy), with the rules exactly as `helm
 * template` renders them (only prometheusRule.forDuration / rangeWindow and the two bounds set
 * through values, so a fault fires in seconds and clears seconds after its cause is gone). Each
 * fault is brought about for real, one after another on the shared stack, and Prometheus' own
 * /api/v1/alerts must show its alert(s) `firing`, then none once the cause is removed. At the end,
 * every query of the dashboard must return data. In CI (`CI` set) a missing prometheus fails this
 * suite; elsewhere it is reported as skipped.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "pg";
import { generateApiKey } from "@exportsvc/common";
import { migrate, createPool, type EmbeddedDatabase } from "@exportsvc/db";
import { startEmbeddedPostgresProcess } from "../support/embedded-postgres-process";
import { formLockKeys } from "../../packages/form-datasets/src/sql-helpers";
import { prometheusConfig, prometheusMissing, renderChartRules, startPrometheus, type PrometheusAlert, type RunningPrometheus } from "../../scripts/lib/prometheus";
import { openStalledReaders, runningCopies, seedLargeSuppliers, type StalledReaders } from "../../scripts/lib/stalled-readers";
import { REPO_ROOT } from "../../scripts/lib/chart";
import { accepts } from "../../scripts/lib/stack";
import { kubeTool } from "../../scripts/tools/kube-tools";
import { startE2E, type E2E } from "../support/fixture";
import { csvPath, field, formOrganization, idFactory, site, waitFor, type ApplyBody, type FormOrganization } from "../support/forms";
import { freePort } from "../support/ports";
import { startTcpProxy, viaProxy, type TcpProxy } from "../support/tcp-proxy";
import { substituteGrafanaVariables } from "../deploy/promql";

const missing = prometheusMissing();
const inCi = Boolean(process.env.CI);
if (missing && !inCi) process.stderr.write(`\nNOTE: ${missing}: the end-to-end alert suite is skipped\n\n`);
const describeWithPrometheus = missing && !inCi ? describe.skip : describe;

const NAMESPACE = "alerts-e2e";
/** Chart values that make the rules fire and clear in seconds; the rules themselves are as rendered. */
const RULE_VALUES = {
  "prometheusRule.forDuration": "4s",
  "prometheusRule.rangeWindow": "20s",
  "prometheusRule.undeclaredWriterHoldSeconds": 3,
  "prometheusRule.maintenanceLagSeconds": 5,
};
const FIRE_TIMEOUT_MS = 120_000;
const CLEAR_TIMEOUT_MS = 120_000;
const TICK_MS = 500;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function drain(res: Promise<Response>): Promise<number> {
  try {
    const r = await res;
    await r.arrayBuffer().catch(() => undefined);
    return r.status;
  } catch {
    return 0;
  }
}

describeWithPrometheus("alerts in a real Prometheus, each under its real cause", () => {
  let dir: string;
  let embedded: EmbeddedDatabase;
  let pgDataDir: string;
  let pgPort: number;
  let databaseUrl: string;
  let redis: ChildProcess | undefined;
  let redisPort: number;
  let keyStore: TcpProxy;
  let e2e: E2E;
  let prometheus: RunningPrometheus;
  let forms: FormOrganization;
  type FormInput = NonNullable<ApplyBody["forms"]>[number];
  let formDataset: { form: (fields: ReturnType<typeof field.text>[]) => FormInput; id: (name: string) => string };
  let slowOrganization: { organizationId: string; secret: string };

  const startRedis = async () => {
    redis = spawn("redis-server", ["--port", String(redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
    redis.on("error", () => undefined);
    await waitFor("redis-server to answer", () => accepts(redisPort), 10_000);
  };
  const stopRedis = () =>
    new Promise<void>((resolve) => {
      const child = redis;
      if (!child || child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once("exit", () => resolve());
      child.kill("SIGKILL");
    });

  beforeAll(async () => {
    if (missing) throw new Error(missing);
    dir = mkdtempSync(join(tmpdir(), "alerts-e2e-"));
    // The stack's own PostgreSQL and Redis: this suite stops them, never the shared ones.
    pgDataDir = join(dir, "pg");
    pgPort = await freePort();
    embedded = await startEmbeddedPostgresProcess(pgDataDir, pgPort, "alerts");
    databaseUrl = embedded.url;
    const migrations = createPool({ connectionString: databaseUrl, max: 1 });
    await migrate(migrations);
    await migrations.end();
    redisPort = await freePort();
    await startRedis();
    const pg = new URL(databaseUrl);
    keyStore = await startTcpProxy(pg.hostname, Number(pg.port));
    e2e = await startE2E({
      databaseUrl,
      redisUrl: `redis://127.0.0.1:${redisPort}`,
      // Four services, a Prometheus and a PostgreSQL of its own on a shared machine: start-up may be slow.
      startTimeoutMs: 180_000,
      // The limits the contract states (the e2e default lifts the window limit).
      env: { RATE_LIMIT_PER_WINDOW: "600", REDIS_COMMAND_TIMEOUT_MS: "500" },
      serviceEnv: {
        // The key store (the gateway's database) behind a proxy that can be cut on its own, and a
        // pool of 3 that slow key look-ups can fill (the pool saturation fault).
        gateway: { DATABASE_URL: viaProxy(databaseUrl, keyStore), KEY_STORE_TIMEOUT_MS: "1000", DATABASE_POOL_MAX: "3" },
      },
    });
    const ports = e2e.stack.ports.metrics!;
    const helm = await kubeTool("helm");
    prometheus = await startPrometheus({
      dir: join(dir, "prometheus"),
      listen: `127.0.0.1:${await freePort()}`,
      rules: renderChartRules(helm, RULE_VALUES),
      config: (rulesFile) =>
        prometheusConfig({
          targets: (["gateway", "catalog", "export", "schema"] as const).map((component) => ({ component, address: `127.0.0.1:${ports[component]}` })),
          namespace: NAMESPACE,
          rulesFile,
          scrapeInterval: "1s",
          evaluationInterval: "1s",
        }),
    });
    // A form organization for the rebuild, not-exportable and maintenance lag faults.
    const id = idFactory();
    const form = (fields: ReturnType<typeof field.text>[]): FormInput => ({ id: id("form"), name: "Alert Probe", recordPrefix: "AP", fields });
    formDataset = { form, id };
    forms = await formOrganization(e2e, {
      sites: [site(id("site"), "Main Site", "UTC")],
      forms: [form([field.text(id("f:note"), "note")])],
      submissions: [{ id: id("sub:1"), formId: id("form"), siteId: id("site"), status: "Completed", values: { note: "one" } }],
    });
    await waitFor("the probe form's dataset", async () => (await forms.get(csvPath("alert_probe"))).status === 200, 30_000);
    // An organization with pages large enough that a reader who reads nothing holds its connection.
    slowOrganization = await e2e.newOrganization();
    await seedLargeSuppliers(e2e.pool, slowOrganization.organizationId, 2000);
    await waitFor("all four targets up", async () => (await prometheus.query("up == 1")).length === 4, 30_000);
  }, 300_000);

  afterAll(async () => {
    await prometheus?.stop();
    await e2e?.stop();
    await keyStore?.close();
    await stopRedis();
    await embedded?.stop().catch(() => undefined);
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  /** What healthy clients do: the listing and a small page, with the demo key. */
  const normalTraffic = async () => {
    await Promise.all([drain(e2e.get("/v1/datasets")), drain(e2e.get(csvPath("resources_suppliers", { limit: 5 })))]);
  };

  const active = async (): Promise<PrometheusAlert[]> => prometheus.alerts();
  const describeAlerts = (alerts: PrometheusAlert[]) => alerts.map((a) => `${a.labels.alertname}=${a.state}`).join(", ") || "none";

  /** Runs `traffic` every tick until `done` holds, failing with what Prometheus showed last. */
  async function until(what: string, done: (alerts: PrometheusAlert[]) => boolean, traffic: () => Promise<unknown>, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last: PrometheusAlert[] = [];
    for (;;) {
      const started = Date.now();
      await traffic();
      last = await active();
      if (done(last)) return;
      if (Date.now() > deadline) throw new Error(`${what}: not reached within ${timeoutMs} ms; active alerts: ${describeAlerts(last)}\n${prometheus.log().slice(-2000)}`);
      await sleep(Math.max(0, TICK_MS - (Date.now() - started)));
    }
  }

  /**
   * Waits until no alert is active, brings the cause about, drives `traffic` until every `expected`
   * alert has been seen firing (with the scrape's namespace), removes the cause, and waits until
   * none of them is active any more.
   */
  async function fault(expected: string[], cause: () => Promise<() => Promise<void>>, traffic: () => Promise<unknown> = normalTraffic): Promise<void> {
    await until("quiet before the fault", (alerts) => alerts.length === 0, normalTraffic, CLEAR_TIMEOUT_MS);
    const seen = new Set<string>();
    const undo = await cause();
    let undone = false;
    try {
      await until(
        `${expected.join(" and ")} firing`,
        (alerts) => {
          for (const a of alerts) if (a.state === "firing" && a.labels.namespace === NAMESPACE) seen.add(a.labels.alertname);
          return expected.every((name) => seen.has(name));
        },
        traffic,
        FIRE_TIMEOUT_MS,
      );
      undone = true;
      await undo();
    } finally {
      if (!undone) await undo().catch(() => undefined);
    }
    expect([...seen].filter((name) => expected.includes(name)).sort()).toEqual([...expected].sort());
    await until(`${expected.join(" and ")} cleared`, (alerts) => !alerts.some((a) => expected.includes(a.labels.alertname)), normalTraffic, CLEAR_TIMEOUT_MS);
  }

  it("a healthy stack under traffic: every rule evaluates without error and none is active", async () => {
    for (let i = 0; i < 10; i++) {
      await normalTraffic();
      await sleep(TICK_MS);
    }
    const rules = await prometheus.rules();
    const alerting = rules.filter((r) => r.type === "alerting");
    expect(alerting.map((r) => r.name).sort()).toEqual(
      [
        "DatasetExportAuthUnavailable",
        "DatasetExportDatabaseUnavailable",
        "DatasetExportDatasetNotExportable",
        "DatasetExportDbPoolSaturated",
        "DatasetExportHighErrorRate",
        "DatasetExportMaintenanceLagHigh",
        "DatasetExportRateLimitSurge",
        "DatasetExportRebuildFailures",
        "DatasetExportSharedStoreFallback",
        "DatasetExportStreamAbortsHigh",
        "DatasetExportVisibilityHorizonStuck",
      ].sort(),
    );
    expect(alerting.filter((r) => r.health !== "ok" || r.lastError).map((r) => `${r.name}: ${r.health} ${r.lastError ?? ""}`)).toEqual([]);
    expect(describeAlerts(await active())).toBe("none");
  }, 60_000);

  it("a 5xx rate (the export service down): DatasetExportHighErrorRate", async () => {
    await fault(
      ["DatasetExportHighErrorRate"],
      async () => {
        e2e.stack.processes.export.kill("SIGKILL");
        await new Promise((r) => e2e.stack.processes.export.once("exit", r));
        return () => e2e.stack.restart("export");
      },
    );
  }, 400_000);

  it("PostgreSQL stopped: DatasetExportDatabaseUnavailable", async () => {
    await fault(
      ["DatasetExportDatabaseUnavailable"],
      async () => {
        await normalTraffic(); // the demo key is then in the success cache: requests reach the database
        await embedded.stop();
        return async () => {
          embedded = await startEmbeddedPostgresProcess(pgDataDir, pgPort, "alerts");
          await waitFor("the stack ready again", async () => (await fetch(`${e2e.baseUrl}/health/ready`)).status === 200, 60_000);
        };
      },
    );
  }, 400_000);

  it("the key store unreachable: DatasetExportAuthUnavailable", async () => {
    await fault(
      ["DatasetExportAuthUnavailable"],
      async () => {
        keyStore.cut();
        return async () => keyStore.restore();
      },
      // Keys no cache has seen: each check needs the key store.
      () => Promise.all([0, 1].map(() => drain(fetch(`${e2e.baseUrl}/v1/datasets`, { headers: { Authorization: `Bearer ${generateApiKey().secret}` } })))),
    );
  }, 400_000);

  it("Redis stopped: DatasetExportSharedStoreFallback", async () => {
    await fault(["DatasetExportSharedStoreFallback"], async () => {
      await stopRedis();
      return startRedis;
    });
  }, 400_000);

  it("a rate-limit burst: DatasetExportRateLimitSurge", async () => {
    const burster = await e2e.newOrganization();
    await fault(
      ["DatasetExportRateLimitSurge"],
      async () => async () => undefined,
      // 30 requests at once from one organization, beyond its 5 in flight (and soon its 600 a minute).
      () => Promise.all(Array.from({ length: 30 }, () => drain(fetch(`${e2e.baseUrl}/v1/datasets`, { headers: { Authorization: `Bearer ${burster.secret}` } })))),
    );
  }, 400_000);

  it("a failing rebuild (a site without a time zone), its form not exportable: DatasetExportRebuildFailures, DatasetExportDatasetNotExportable", async () => {
    const { id, form } = formDataset;
    await fault(
      ["DatasetExportRebuildFailures", "DatasetExportDatasetNotExportable"],
      async () => {
        await forms.apply({ sites: [site(id("site"), "Main Site", "")] });
        await forms.apply({ forms: [form([field.text(id("f:note"), "note"), field.text(id("f:extra"), "extra")])]});
        return async () => {
          await forms.apply({ sites: [site(id("site"), "Main Site", "UTC")] });
          await waitFor("the probe form exportable again", async () => (await forms.get(csvPath("alert_probe"))).status === 200, 30_000);
        };
      },
      () => Promise.all([normalTraffic(), drain(forms.get(csvPath("alert_probe")))]),
    );
  }, 400_000);

  it("maintenance lag (a change the loop cannot apply): DatasetExportMaintenanceLagHigh", async () => {
    const { id } = formDataset;
    const holder = new Client({ connectionString: databaseUrl });
    await holder.connect();
    try {
      let n = 2;
      await fault(["DatasetExportMaintenanceLagHigh"], async () => {
        // Another worker holds the form: its new submission waits in the change log and ages.
        await holder.query("BEGIN");
        await holder.query("SELECT pg_advisory_xact_lock($1, $2)", formLockKeys(forms.organizationId, id("form")));
        await forms.apply({ submissions: [{ id: id(`sub:${n++}`), formId: id("form"), siteId: id("site"), status: "Completed", values: { note: "held" } }] });
        return async () => {
          await holder.query("COMMIT");
        };
      });
    } finally {
      await holder.end();
    }
  }, 400_000);

  it("an undeclared writer holding the horizon: DatasetExportVisibilityHorizonStuck", async () => {
    const writer = new Client({ connectionString: databaseUrl });
    await writer.connect();
    try {
      await fault(["DatasetExportVisibilityHorizonStuck"], async () => {
        await writer.query("BEGIN");
        await writer.query("SELECT pg_current_xact_id()");
        return async () => {
          await writer.query("COMMIT");
        };
      });
    } finally {
      await writer.end();
    }
  }, 400_000);

  it("pool saturation (key look-ups slowed by a lock hold every gateway connection): DatasetExportDbPoolSaturated", async () => {
    const locker = new Client({ connectionString: databaseUrl });
    await locker.connect();
    try {
      await fault(
        ["DatasetExportDbPoolSaturated"],
        async () => {
          // Every look-up of a key no cache has seen now waits on the lock until the key store timeout.
          await locker.query("BEGIN");
          await locker.query("LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE");
          return async () => {
            await locker.query("COMMIT");
          };
        },
        // More look-ups than the gateway's pool of 3 can serve, started every tick without waiting for
        // the last ones, so that some always queue for a connection (each gives up after 5 s).
        async () => {
          for (let i = 0; i < 8; i++) void drain(fetch(`${e2e.baseUrl}/v1/datasets`, { headers: { Authorization: `Bearer ${generateApiKey().secret}` } }));
        },
      );
    } finally {
      await locker.end();
    }
  }, 400_000);

  it("aborted streams (their database connections killed mid-page): DatasetExportStreamAbortsHigh", async () => {
    const org = slowOrganization;
    let readers: StalledReaders | undefined;
    const admin = createPool({ connectionString: databaseUrl, max: 1 });
    try {
      await fault(
        ["DatasetExportStreamAbortsHigh"],
        async () => async () => readers?.close(),
        async () => {
          readers?.close();
          readers = openStalledReaders(e2e.baseUrl, org.secret, 1, csvPath("resources_suppliers", { limit: 2000 }));
          await waitFor("a page query streaming", async () => (await runningCopies(admin, org.organizationId)) > 0, 20_000);
          await admin.query(
            `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'COPY%' AND query LIKE $1`,
            [`%${org.organizationId}%`],
          );
        },
      );
    } finally {
      readers?.close();
      await admin.end();
    }
  }, 400_000);

  it("after all that traffic, every dashboard panel's query returns data", async () => {
    const dashboard = JSON.parse(readFileSync(join(REPO_ROOT, "charts", "dataset-export", "dashboards", "dataset-export.json"), "utf8")) as {
      panels: { title: string; targets?: { expr: string }[] }[];
    };
    const empty: string[] = [];
    let queries = 0;
    for (const panel of dashboard.panels) {
      for (const target of panel.targets ?? []) {
        const expr = target.expr
          .replaceAll("$namespace", NAMESPACE)
          .replaceAll("$__rate_interval", "1m")
          .replaceAll("$__range", "1h");
        expect(substituteGrafanaVariables(expr)).toBe(expr); // nothing left for Grafana to fill in
        queries++;
        if ((await prometheus.query(expr)).length === 0) empty.push(`${panel.title}: ${target.expr}`);
      }
    }
    expect(queries).toBeGreaterThan(20);
    expect(empty).toEqual([]);
  }, 120_000);
});
