import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createDatabase, dropDatabase } from "@exportsvc/db";
import { parse as parseYaml } from "yaml";
import { containerEnvironment, DEFAULT_VALUE_ARGS, helmTemplate, RELEASE, workloadOf, type K8sObject } from "../../../scripts/lib/chart";
import { accepts } from "../../../scripts/lib/stack";
import { kubeTool } from "../../../scripts/tools/kube-tools";
import { freePort } from "../../support/ports";

/**
 * The stack from its images, as the chart runs it: the migrations Job's command, then schema,
 * catalog, export and gateway as containers (podman, host network), each configured only through
 * the environment variables the chart gives that Deployment (its ConfigMap and its secretKeyRefs),
 * read from `helm template` of the chart's default values (scripts/lib/chart.ts), never restated
 * here. What differs from a cluster, and why:
 * - ports: all four share the host's network namespace, so each listening port (gateway.port, the
 *   grpcPorts, config.metricsPort) is set to a free one on the helm command line; the chart has one
 *   metrics port for every service, so each component's environment comes from its own render;
 * - Service names (`dataset-export-catalog:…`) resolve to 127.0.0.1 through --add-host;
 * - PostgreSQL and Redis are the host's: a fresh database of this run (dropped at the end), and
 *   the shared Redis (keys are per organization, and the organizations are this run's own).
 * Containers run as the chart runs them: read-only root filesystem, a tmpfs at /tmp, no
 * capabilities, no privilege escalation, the image's own user.
 */
export type Component = "schema" | "catalog" | "export" | "gateway";
export const COMPONENTS: Component[] = ["schema", "catalog", "export", "gateway"];
const ROOT = join(__dirname, "..", "..", "..");
const PODMAN_SH = join(ROOT, "scripts", "images", "podman.sh");

export interface ImageSet {
  tag: string;
  commit: string;
  image(component: Component): string;
}

export function imageSet(): ImageSet {
  const tag = process.env.DEPLOY_IMAGE_TAG;
  const commit = process.env.DEPLOY_GIT_COMMIT;
  if (!tag || !commit) throw new Error("DEPLOY_IMAGE_TAG and DEPLOY_GIT_COMMIT are not set: run through `npm run images:test`");
  const repo = process.env.IMAGE_REPO ?? "localhost/dataset-export";
  return { tag, commit, image: (c) => `${repo}-${c}:${tag}` };
}

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** podman with this machine's settings (scripts/images/podman.sh owns them). */
export function podman(args: string[], opts: { timeoutMs?: number; input?: string } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      "bash",
      ["-c", `. ${JSON.stringify(PODMAN_SH)}; pm "$@"`, "pm", ...args],
      { cwd: ROOT, timeout: opts.timeoutMs ?? 120_000, maxBuffer: 64 * 1024 * 1024, encoding: "utf8" },
      (err, stdout, stderr) => {
        if (err && typeof (err as NodeJS.ErrnoException).code === "string") return reject(err);
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
      },
    );
    if (opts.input !== undefined) child.stdin?.end(opts.input);
  });
}

export async function podmanOk(args: string[], opts: { timeoutMs?: number } = {}): Promise<string> {
  const r = await podman(args, opts);
  if (r.code !== 0) throw new Error(`podman ${args.slice(0, 3).join(" ")} … exited ${r.code}:\n${r.stderr}${r.stdout}`.slice(0, 6000));
  return r.stdout;
}

/** The chart's default values (charts/dataset-export/values.yaml). */
export function chartValues(): any {
  return parseYaml(readFileSync(join(ROOT, "charts", "dataset-export", "values.yaml"), "utf8"));
}

export interface Ports {
  gateway: number;
  grpc: Record<Exclude<Component, "gateway">, number>;
  metrics: Record<Component, number>;
}

export interface Secrets {
  DATABASE_URL: string;
  REDIS_URL?: string;
  KEY_HASH_SECRET: string;
  CURSOR_KEYS: string;
}

/** The chart rendered for the stack: per component, with this run's ports (its own metrics port). */
export type StackRender = Record<Component, K8sObject[]>;

export function renderChartForStack(helm: string, ports: Ports): StackRender {
  const set = (path: string, value: number) => ["--set", `${path}=${value}`];
  const shared = [
    ...DEFAULT_VALUE_ARGS,
    ...set("gateway.port", ports.gateway),
    ...(["schema", "catalog", "export"] as const).flatMap((c) => set(`${c}.grpcPort`, ports.grpc[c])),
  ];
  return Object.fromEntries(COMPONENTS.map((c) => [c, helmTemplate(helm, [...shared, ...set("config.metricsPort", ports.metrics[c])])])) as StackRender;
}

/** The environment the chart gives one component's container: its ConfigMap plus its Deployment's secretKeyRefs. */
export function chartEnvironment(render: StackRender, component: Component, secrets: Secrets): Record<string, string> {
  return containerEnvironment(render[component], component, { ...secrets });
}

/** The pod's terminationGracePeriodSeconds, as the chart renders it. */
export function terminationGraceSeconds(render: StackRender, component: Component): number {
  const seconds = workloadOf(render[component], component).spec.template.spec.terminationGracePeriodSeconds;
  if (seconds === undefined) throw new Error(`the chart's ${component} Deployment has no terminationGracePeriodSeconds`);
  return seconds;
}

/** The migrations Job's command and environment (templates/migrations-job.yaml), with the run's database. */
export function migrationsJob(render: StackRender, databaseUrl: string): { command: string[]; env: Record<string, string> } {
  const objects = render.schema;
  const container = workloadOf(objects, "migrations").spec.template.spec.containers[0];
  if (!container.command) throw new Error("the chart's migrations Job has no command");
  return { command: container.command, env: containerEnvironment(objects, "migrations", { DATABASE_URL: databaseUrl }) };
}

/** The chart's securityContext, in podman's terms; the user is the image's own (USER 1000:1000). */
const SECURITY = ["--read-only", "--tmpfs", "/tmp:rw,size=16m", "--cap-drop", "all", "--security-opt", "no-new-privileges"];
const HOSTS = COMPONENTS.filter((c) => c !== "gateway").flatMap((c) => ["--add-host", `${RELEASE}-${c}:127.0.0.1`]);
const envArgs = (env: Record<string, string>) => Object.entries(env).flatMap(([k, v]) => ["-e", `${k}=${v}`]);

export interface ContainerStack {
  images: ImageSet;
  runId: string;
  databaseUrl: string;
  baseUrl: string;
  metricsUrl(component: Component): string;
  values: any;
  render: StackRender;
  ports: Ports;
  secrets: Secrets;
  containers: Record<Component, string>;
  migrateOutput: string;
  logs(component: Component): Promise<string>;
  /** Runs a one-off container of an image with the chart's security settings (`podman run --rm`). */
  runOnce(image: string, command: string[], env?: Record<string, string>, extra?: string[]): Promise<Run>;
  stop(): Promise<void>;
}


/**
 * Creates the run's database, runs the migrations Job's command from the migrations image, lets
 * `seed` fill the database, then starts the four services and waits for the gateway's readiness.
 */
export async function startContainerStack(seed: (databaseUrl: string, keyHashSecret: string) => Promise<void>): Promise<ContainerStack> {
  const images = imageSet();
  const values = chartValues();
  const helm = await kubeTool("helm");
  const runId = `dx${process.pid}${Date.now().toString(36)}`;
  const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
  const dbName = `exportsvc_images_${runId}`;
  const databaseUrl = await createDatabase(adminUrl, dbName);
  const containers = Object.fromEntries(COMPONENTS.map((c) => [c, `${runId}-${c}`])) as Record<Component, string>;
  const free = await Promise.all(Array.from({ length: 8 }, freePort));
  const ports: Ports = {
    gateway: free[0],
    grpc: { schema: free[1], catalog: free[2], export: free[3] },
    metrics: { schema: free[4], catalog: free[5], export: free[6], gateway: free[7] },
  };
  const render = renderChartForStack(helm, ports);
  const secrets: Secrets = {
    DATABASE_URL: databaseUrl,
    REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
    KEY_HASH_SECRET: randomBytes(16).toString("hex"),
    CURSOR_KEYS: `3:${randomBytes(24).toString("base64")}`,
  };
  const runOnce = (image: string, command: string[], env: Record<string, string> = {}, extra: string[] = []) =>
    podman(["run", "--rm", "--network", "host", ...SECURITY, ...extra, ...envArgs(env), image, ...command], { timeoutMs: 180_000 });
  const removeAll = async () => {
    await podman(["rm", "--force", "--time", "0", ...Object.values(containers)]).catch(() => undefined);
  };
  const stop = async () => {
    // As Kubernetes does: SIGTERM, then SIGKILL after the termination grace period.
    await Promise.all(
      COMPONENTS.slice().reverse().map((c) =>
        podman(["stop", "--time", String(terminationGraceSeconds(render, c)), containers[c]], { timeoutMs: 120_000 }).catch(() => undefined),
      ),
    );
    await removeAll();
    await dropDatabase(adminUrl, dbName).catch(() => undefined);
  };

  try {
    // The migrations Job: command and environment of the rendered templates/migrations-job.yaml.
    const job = migrationsJob(render, databaseUrl);
    const migrate = await runOnce(images.image(values.migrations.imageService), job.command, job.env);
    if (migrate.code !== 0) throw new Error(`migrations Job failed (exit ${migrate.code}):\n${migrate.stderr}${migrate.stdout}`);
    await seed(databaseUrl, secrets.KEY_HASH_SECRET);

    for (const c of COMPONENTS) {
      const env = chartEnvironment(render, c, secrets);
      await podmanOk(["run", "--detach", "--name", containers[c], "--network", "host", ...HOSTS, ...SECURITY, ...envArgs(env), images.image(c)]);
    }
    const baseUrl = `http://127.0.0.1:${ports.gateway}`;
    await waitForReady(baseUrl, containers, ports);
    return {
      images,
      runId,
      databaseUrl,
      baseUrl,
      metricsUrl: (c) => `http://127.0.0.1:${ports.metrics[c]}/metrics`,
      values,
      render,
      ports,
      secrets,
      containers,
      migrateOutput: migrate.stdout + migrate.stderr,
      logs: async (c) => {
        const r = await podman(["logs", containers[c]]);
        return r.stdout + r.stderr;
      },
      runOnce,
      stop,
    };
  } catch (err) {
    const logs = await Promise.all(COMPONENTS.map(async (c) => `--- ${c}\n${(await podman(["logs", "--tail", "40", containers[c]]).catch(() => ({ stdout: "", stderr: "" }))).stderr}`));
    await stop();
    (err as Error).message += `\n${logs.join("\n")}`;
    throw err;
  }
}

async function waitForReady(baseUrl: string, containers: Record<Component, string>, ports: Ports, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  while (Date.now() < deadline) {
    const states = await podmanOk(["inspect", "--format", "{{.Name}} {{.State.Status}} {{.State.ExitCode}}", ...Object.values(containers)]);
    const down = states.split("\n").filter((l) => l.trim() && !/ running /.test(l));
    if (down.length > 0) throw new Error(`container(s) not running during start-up: ${down.join("; ")}`);
    try {
      const res = await fetch(`${baseUrl}/health/ready`, { signal: AbortSignal.timeout(3000) });
      const grpcUp = await Promise.all(Object.values(ports.grpc).map(accepts));
      if (res.ok && grpcUp.every(Boolean)) return;
      last = `HTTP ${res.status}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`gateway container not ready after ${timeoutMs} ms (${last})`);
}
