/**
 * Image hygiene, measured on the built images (`npm run images:test`): size (reported, bounded),
 * a numeric non-root user, nothing but the bundle, its source map, the migrations and the
 * runtime dependencies under /app (no sources, no npm cache), and stack traces that point at
 * TypeScript lines.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { SERVICE_NODE_FLAGS } from "../../../scripts/lib/stack";
import { COMPONENTS, imageSet, podman, podmanOk, type Component } from "./podman-stack";

const images = imageSet();
const MB = 1024 * 1024;

/** An image's size, what it adds to its base (NODE_IMAGE) and its layers over 1 MB. */
async function sizes(image: string): Promise<{ total: number; own: number; big: string[] }> {
  const size = async (ref: string) => Number((await podmanOk(["image", "inspect", "--format", "{{.Size}}", ref])).trim());
  const total = await size(image);
  const base = process.env.DEPLOY_BASE_IMAGE ? await size(process.env.DEPLOY_BASE_IMAGE) : 0;
  const history = JSON.parse(await podmanOk(["history", "--format", "json", image])) as Array<{ size: number; createdBy?: string; CreatedBy?: string }>;
  const big = history
    .filter((h) => h.size > MB)
    .map((h) => `${(h.size / MB).toFixed(1)} MB ${(h.createdBy ?? h.CreatedBy ?? "").replace(/^\/bin\/sh -c (#\(nop\) )?/, "").slice(0, 60)}`);
  return { total, own: total - base, big };
}

const run = (component: Component, command: string[], extra: string[] = []) =>
  podman(["run", "--rm", "--network", "none", "--read-only", ...extra, images.image(component), ...command]);

describe("image hygiene", () => {
  const report: string[] = [];
  afterAll(() => {
    if (report.length) process.stdout.write(`\nimage sizes (${images.tag}):\n${report.join("\n")}\n`);
  });

  it.each(COMPONENTS)("%s: size reported and bounded (what the Dockerfile adds to NODE_IMAGE)", async (component) => {
    const { total, own, big } = await sizes(images.image(component));
    report.push(`  ${component.padEnd(8)} ${(total / MB).toFixed(1)} MB, ${(own / MB).toFixed(1)} MB over the base image; layers: ${big.join("; ")}`);
    expect(process.env.DEPLOY_BASE_IMAGE).toBeTruthy();
    // node_modules trimmed to what the bundles load (~54 MiB, of which the API reference page's
    // Redoc and React ~30), the bundle and its map (~3 MiB), exportctl (~3 MiB).
    expect(own).toBeLessThan(80 * MB);
  });

  it.each(COMPONENTS)("%s: runs as the numeric non-root user 1000:1000 with root-owned, read-only files", async (component) => {
    expect((await podmanOk(["image", "inspect", "--format", "{{.Config.User}}", images.image(component)])).trim()).toBe("1000:1000");
    const r = await run(component, ["sh", "-c", "id -u; id -g; stat -c '%u %a' /app/dist/main.js; find /app -user 1000 -o -perm -o+w ! -type l | head -n 3"]);
    expect(r.stdout.trim().split("\n")).toEqual(["1000", "1000", "0 644"]);
  });

  it.each(COMPONENTS)("%s: /app holds the bundle, its map, exportctl, migrations and runtime dependencies only; no npm cache", async (component) => {
    const r = await run(component, [
      "sh",
      "-c",
      [
        "ls -A /app",
        "echo --; ls -A /app/dist",
        "echo --; find / -xdev \\( -name _cacache -o -name .npm \\) -print",
        "echo --; find /app -name '*.ts' ! -name '*.d.ts' ! -path '/app/node_modules/*' -print",
        "echo --; ls -d /src /app/src /app/packages /app/services 2>/dev/null",
        "echo --; grep -c sourcesContent /app/dist/main.js.map || true",
      ].join("; "),
    ]);
    const [app, dist, caches, sources, sourceDirs, sourcesContent] = r.stdout.split("--\n").map((s) => s.trim());
    expect(app.split("\n").sort()).toEqual(["dist", "migrations", "node_modules"]);
    expect(dist.split("\n").sort()).toEqual(["exportctl.js", "exportctl.js.map", "main.js", "main.js.map", "tracing.js", "tracing.js.map"]);
    expect(caches).toBe("");
    expect(sources).toBe("");
    expect(sourceDirs).toBe("");
    expect(sourcesContent).toBe("0");
  });

  it.each(COMPONENTS)("%s: the command enables source maps and the service's own V8 flags", async (component) => {
    const cmd = JSON.parse(await podmanOk(["image", "inspect", "--format", "{{json .Config.Cmd}}", images.image(component)])) as string[];
    expect(cmd).toEqual(["node", "--enable-source-maps", ...SERVICE_NODE_FLAGS[component], "--import", "./dist/tracing.js", "dist/main.js"]);
  });

  it("node is PID 1", async () => {
    const r = await run("gateway", ["node", "-e", "console.log(process.pid)"]);
    expect(r.stdout.trim()).toBe("1");
  });

  it("a stack trace from inside the bundle points at TypeScript lines", async () => {
    // The gateway fails to listen (an error thrown from its own code at start-up, through a
    // preloaded patch of http.Server#listen): runMain prints the stack, mapped by the source map.
    const probe = "require('node:http').Server.prototype.listen = function () { throw new Error('probe: listen refused') };";
    const r = await run(
      "gateway",
      ["sh", "-c", `echo "${probe}" > /tmp/probe.js && exec node --enable-source-maps -r /tmp/probe.js dist/main.js`],
      ["--tmpfs", "/tmp", "-e", "DATABASE_URL=postgres://nobody@127.0.0.1:1/none", "-e", `KEY_HASH_SECRET=${"0".repeat(32)}`, "-e", "LOG_LEVEL=silent"],
    );
    expect(r.stderr).toContain("probe: listen refused");
    expect(r.code).toBe(1);
    const frames = r.stderr.split("\n").filter((l) => /^\s+at /.test(l));
    // The caller of listen() is the gateway's listener (services/gateway/src/http/listener.ts), at
    // the line that calls it (the map's paths are relative to dist/: /app/src/… is the service's
    // src/, /packages/… the repo's).
    const source = readFileSync(join(__dirname, "..", "..", "..", "services", "gateway", "src", "http", "listener.ts"), "utf8").split("\n");
    const listenLine = source.findIndex((l) => /\bserver\.listen\(/.test(l)) + 1;
    expect(listenLine).toBeGreaterThan(0);
    expect(frames[1]).toMatch(new RegExp(`\\(/app/src/http/listener\\.ts:${listenLine}:\\d+\\)$`));
    expect(frames.some((f) => /\/packages\/common\/src\/service-main\.ts:\d+:\d+\)$/.test(f))).toBe(true);
    expect(frames.filter((f) => f.includes("dist/main.js"))).toEqual([]);
  });
});
