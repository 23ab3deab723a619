#!/usr/bin/env node
/**
 * Runs in the Dockerfile's prod-deps stage: trims node_modules to what the bundles load at run
 * time. esbuild inlines every dependency except the ones the build scripts keep external (pg,
 * @grpc/grpc-js, koa, @opentelemetry/*, @mikro-orm/*, …, kept so instrumentation can patch them
 * or because they load modules dynamically), so the runtime needs only the packages the bundles
 * `require` and what those depend on. Then drops type declarations, source maps, TypeScript
 * sources and docs from what is left (licences stay).
 *
 *   node prune-node-modules.js <node_modules dir> <bundle.js>...
 * Prints what it kept and removed.
 */
const fs = require("node:fs");
const path = require("node:path");
const { builtinModules } = require("node:module");

const [nodeModules, ...bundles] = process.argv.slice(2);
if (!nodeModules || bundles.length === 0) {
  process.stderr.write("usage: prune-node-modules.js <node_modules> <bundle.js>...\n");
  process.exit(2);
}
const root = path.resolve(nodeModules);
const builtins = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));

/** Package name of a bare specifier ("@scope/name/sub" -> "@scope/name"), or undefined for builtins and paths. */
function packageName(specifier) {
  if (builtins.has(specifier) || builtins.has(specifier.split("/")[0]) || specifier.startsWith(".") || specifier.startsWith("/")) return undefined;
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
}

/** Finds a package's directory as Node would from `fromDir` (nested node_modules first, then up to the root). */
function resolvePackageDir(name, fromDir) {
  for (let dir = fromDir; dir.length >= root.length; dir = path.dirname(dir)) {
    const candidate = path.basename(dir) === "node_modules" ? path.join(dir, name) : path.join(dir, "node_modules", name);
    if (fs.existsSync(path.join(candidate, "package.json"))) return fs.realpathSync(candidate);
    if (dir === root) break;
  }
  return undefined;
}

const keep = new Set();
const queue = [];
for (const bundle of bundles) {
  const text = fs.readFileSync(bundle, "utf8");
  for (const m of text.matchAll(/\b(?:require|require\.resolve|import)\(\s*["']([^"']+)["']\s*\)/g)) {
    const name = packageName(m[1]);
    if (!name) continue;
    const dir = resolvePackageDir(name, root);
    // Optional externals (pg-native, …) may be absent: the bundle guards their require.
    if (dir) queue.push(dir);
  }
}
while (queue.length > 0) {
  const dir = queue.pop();
  if (keep.has(dir)) continue;
  keep.add(dir);
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
  const deps = { ...pkg.dependencies, ...pkg.optionalDependencies, ...pkg.peerDependencies };
  for (const name of Object.keys(deps)) {
    const found = resolvePackageDir(name, dir);
    if (found) queue.push(found);
  }
}

/** Every package directory under node_modules (scoped and nested ones included). */
function packageDirs(dir, out = []) {
  if (!fs.existsSync(dir)) return out;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isDirectory() || entry.name.startsWith(".")) continue;
    const full = path.join(dir, entry.name);
    if (entry.name.startsWith("@")) packageDirs(full, out);
    else {
      out.push(full);
      packageDirs(path.join(full, "node_modules"), out);
    }
  }
  return out;
}

let removed = 0;
for (const dir of packageDirs(root)) {
  if (!fs.existsSync(dir)) continue;
  const real = fs.realpathSync(dir);
  // A kept package's nested node_modules may hold kept packages: only whole unneeded packages go.
  if (keep.has(real) || [...keep].some((k) => k.startsWith(`${real}${path.sep}node_modules${path.sep}`))) continue;
  fs.rmSync(dir, { recursive: true, force: true });
  removed++;
}

const DROP = /(\.d\.[cm]?ts|\.[cm]?ts|\.map|\.tsbuildinfo)$|^(readme|changelog|history)(\.\w+)?$/i;
let files = 0;
function dropFiles(dir) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) dropFiles(full);
    else if (entry.isFile() && DROP.test(entry.name)) {
      fs.rmSync(full);
      files++;
    }
  }
}
dropFiles(root);
/** Scope directories left empty. */
for (const entry of fs.readdirSync(root)) {
  const full = path.join(root, entry);
  if (entry.startsWith("@") && fs.statSync(full).isDirectory() && fs.readdirSync(full).length === 0) fs.rmdirSync(full);
}
process.stdout.write(`node_modules: kept ${keep.size} packages, removed ${removed}, dropped ${files} declaration/map/source/doc files\n`);
