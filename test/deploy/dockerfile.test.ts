import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { repoPath } from "./kustomize";
import { execFileSync } from "node:child_process";
import { SERVICE_NODE_FLAGS, type ServiceName } from "../../scripts/lib/stack";

/**
 * No Docker engine runs on our machines, so the Dockerfile is checked for the properties the
 * deployment relies on: every workspace manifest reaches `npm ci`, one target per service that
 * ships the bundle its build script writes, a numeric non-root user, and the build identity.
 */
const dockerfile = readFileSync(repoPath("Dockerfile"), "utf8");
const lines = dockerfile.split("\n").filter((l) => l.trim() !== "" && !l.trim().startsWith("#"));
const SERVICES = ["gateway", "catalog", "export", "schema"];

/** Stages: name -> instructions. */
const stages = new Map<string, string[]>();
let current = "";
for (const line of lines.join("\n").replace(/\\\n\s*/g, " ").split("\n")) {
  const from = /^FROM\s+\S+(?:\s+AS\s+(\S+))?/i.exec(line.trim());
  if (from) {
    current = from[1] ?? `stage${stages.size}`;
    stages.set(current, [line.trim()]);
  } else if (current) stages.get(current)!.push(line.trim());
}

function workspaceDirs(): string[] {
  const root = JSON.parse(readFileSync(repoPath("package.json"), "utf8")) as { workspaces: string[] };
  return root.workspaces.flatMap((pattern) => {
    const base = pattern.replace(/\/\*$/, "");
    return readdirSync(repoPath(base), { withFileTypes: true })
      .filter((d) => d.isDirectory() && existsSync(repoPath(base, d.name, "package.json")))
      .map((d) => `${base}/${d.name}`);
  });
}

describe("Dockerfile", () => {
  it("copies every workspace's package.json (and the lockfile) before npm ci", () => {
    const manifests = stages.get("manifests")!.join("\n");
    expect(manifests).toContain("COPY package.json package-lock.json ./");
    const dirs = workspaceDirs();
    expect(dirs).toEqual(expect.arrayContaining(SERVICES.map((s) => `services/${s}`)));
    for (const dir of dirs) expect(manifests).toContain(`COPY ${dir}/package.json ${dir}/`);
    expect(stages.get("deps")!.join("\n")).toMatch(/npm ci\b/);
    expect(stages.get("prod-deps")!.join("\n")).toMatch(/npm ci --omit=dev/);
  });

  it("builds every service image from one stage, picking the bundle by SERVICE", () => {
    const stage = stages.get("service")!;
    expect(stage[0]).toMatch(/^FROM runtime AS service$/);
    expect(stage).toContain("ARG SERVICE");
    const dist = "/src/services/${SERVICE}/dist";
    expect(stage.join("\n")).toContain(`COPY --from=build --chown=0:0 ${dist}/main.js ${dist}/main.js.map ${dist}/tracing.js ${dist}/tracing.js.map ./dist/`);
    expect(stage.join("\n")).toContain('LABEL org.opencontainers.image.title="dataset-export-${SERVICE}"');
    // No stage per service: the one definition is all there is.
    for (const service of SERVICES) expect(stages.has(service)).toBe(false);
    // The image build passes each service's name to the target it runs from, for exactly the four services.
    const build = readFileSync(repoPath("scripts", "images", "build.sh"), "utf8");
    expect(build).toContain('--target "$(target_of "$service")" --build-arg SERVICE="$service"');
    expect(/^SERVICES=\(([^)]*)\)$/m.exec(build)?.[1].split(" ")).toEqual(SERVICES);
  });

  /** The CMD a stage ends with (the last one wins), as the exec-form array. */
  function stageCmd(name: string): string[] {
    const cmds = stages.get(name)!.filter((l) => l.startsWith("CMD "));
    return JSON.parse(cmds[cmds.length - 1].slice(4)) as string[];
  }

  /** The target scripts/images/build.sh builds a service from, by running its own target_of. */
  function targetOf(service: string): string {
    const build = readFileSync(repoPath("scripts", "images", "build.sh"), "utf8");
    const fn = /^target_of\(\) \{\n[\s\S]*?\n\}$/m.exec(build);
    expect(fn).not.toBeNull();
    return execFileSync("bash", ["-c", `${fn![0]}\ntarget_of "$1"`, "target_of", service], { encoding: "utf8" }).trim();
  }

  it.each(SERVICES)("%s's image runs node with the service's own V8 flags (SERVICE_NODE_FLAGS)", (service) => {
    const target = targetOf(service);
    expect(stages.has(target)).toBe(true);
    // Every target is the service stage, or a stage built on it that only changes the command.
    if (target !== "service") {
      expect(stages.get(target)![0]).toBe(`FROM service AS ${target}`);
      expect(stages.get(target)!.slice(1).every((l) => l.startsWith("CMD "))).toBe(true);
    }
    const cmd = target === "service" ? stageCmd("runtime") : stageCmd(target);
    expect(cmd).toEqual(["node", "--enable-source-maps", ...SERVICE_NODE_FLAGS[service as ServiceName], "--import", "./dist/tracing.js", "dist/main.js"]);
  });

  it.each(SERVICES)("%s's build script writes the bundle the service stage ships", (service) => {
    const pkg = JSON.parse(readFileSync(repoPath("services", service, "package.json"), "utf8")) as { scripts: { build: string } };
    // Two entry points: dist/main.js and dist/tracing.js, which the image preloads.
    expect(pkg.scripts.build).toMatch(/^esbuild src\/main\.ts src\/tracing\.ts .*--outdir=dist /);
  });

  it("ships exportctl and the migrations where migrate() looks for them (<bundle dir>/../migrations)", () => {
    const pkg = JSON.parse(readFileSync(repoPath("packages", "exportctl", "package.json"), "utf8")) as { scripts: { build: string } };
    expect(pkg.scripts.build).toContain("--outfile=dist/exportctl.js");
    const runtime = stages.get("runtime")!.join("\n");
    expect(runtime).toContain("/src/packages/exportctl/dist/exportctl.js /src/packages/exportctl/dist/exportctl.js.map ./dist/");
    expect(runtime).toContain("/src/packages/db/migrations ./migrations");
    expect(readFileSync(repoPath("packages", "db", "src", "migrate.ts"), "utf8")).toContain('join(__dirname, "..", "migrations")');
    expect(readFileSync(repoPath("charts", "dataset-export", "templates", "migrations-job.yaml"), "utf8")).toContain(
      'command: ["node", "dist/exportctl.js", "migrate"]',
    );
  });

  it("runs in production mode as a numeric non-root user, with the build identity in the environment", () => {
    const runtime = stages.get("runtime")!.join("\n");
    expect(runtime).toMatch(/^ENV NODE_ENV=production( |$)/m);
    const user = /^USER (\d+):(\d+)$/m.exec(runtime);
    expect(user).not.toBeNull();
    expect(Number(user![1])).toBeGreaterThan(0);
    for (const arg of ["IMAGE_TAG", "GIT_COMMIT", "BUILD_DATE"]) {
      expect(runtime).toMatch(new RegExp(`^ARG ${arg}=`, "m"));
      expect(runtime).toContain(`${arg}=\${${arg}}`);
    }
    // podman/buildah's layer cache ignores build-argument values in ENV; a RUN reading them busts it.
    expect(runtime).toMatch(/^ARG BUILD_DATE=.*\nRUN test -n "\$IMAGE_TAG"/m);
    // Nothing after USER switches back to root.
    expect(stages.get("service")!.join("\n")).not.toMatch(/^USER /m);
  });

  it("installs with npm 10.9.2 (as .ci/run does) in every stage that runs npm ci", () => {
    // npm 11's `ci` refuses the lockfile (it wants entries for other platforms' optional packages).
    expect(stages.get("base")!.join("\n")).toMatch(/npm install -g npm@10\.9\.2\b/);
    const ciStages = [...stages].filter(([, body]) => body.some((l) => /\bnpm ci\b/.test(l))).map(([name]) => name);
    expect(ciStages.sort()).toEqual(["deps", "prod-deps"]);
    for (const name of ciStages) expect(stages.get(name)![0]).toMatch(/^FROM (base|manifests|deps) AS /);
    expect(readFileSync(repoPath(".ci", "run"), "utf8")).toContain("npm@10.9.2 ci");
  });

  it("bundles with source maps but without the sources' text, and runs node with --enable-source-maps", () => {
    const build = stages.get("build")!.join("\n");
    expect(build).toContain("-- --sourcemap --sources-content=false");
    // Only esbuild builds get those flags: the shipped workspaces, each named.
    for (const w of ["services/gateway", "services/catalog", "services/export", "services/schema", "packages/exportctl"]) {
      expect(build).toContain(`-w ${w} `);
      const pkg = JSON.parse(readFileSync(repoPath(w, "package.json"), "utf8")) as { scripts: { build: string } };
      expect(pkg.scripts.build).toMatch(/^esbuild /);
    }
    expect(stages.get("runtime")!.join("\n")).toMatch(/^ENV .*NODE_OPTIONS=--enable-source-maps/m);
  });

  it(".dockerignore keeps dependencies, build output and git history out of the context", () => {
    const ignore = readFileSync(repoPath(".dockerignore"), "utf8").split("\n");
    for (const entry of ["**/node_modules", "**/dist", ".git", ".data"]) expect(ignore).toContain(entry);
  });
});
