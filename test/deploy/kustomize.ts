import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseAllDocuments } from "yaml";

/** A Kubernetes object as plain data. */
export type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; [k: string]: unknown }; [k: string]: unknown };

export const objectId = (o: K8sObject): string => `${o.kind}/${o.metadata.name}`;

export function parseYamlDocuments(text: string): K8sObject[] {
  return parseAllDocuments(text)
    .map((d) => {
      if (d.errors.length > 0) throw new Error(d.errors.map((e) => e.message).join("; "));
      return d.toJS() as K8sObject | null;
    })
    .filter((o): o is K8sObject => o !== null);
}

export function kubectlAvailable(): boolean {
  try {
    execFileSync("kubectl", ["version", "--client"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** Renders a kustomization with `kubectl kustomize`. */
export function kubectlKustomize(dir: string): K8sObject[] {
  return parseYamlDocuments(execFileSync("kubectl", ["kustomize", dir], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 }));
}

/**
 * A small kustomize for machines without kubectl, covering exactly the features k8s/ uses:
 * resources (files and directories), namespace, images, strategic-merge patches by kind and name
 * (lists of named items merge by name, other lists are replaced) and configMapGenerator with files.
 * When kubectl exists, the tests check this renderer produces what kubectl does.
 */
export function renderKustomization(dir: string): K8sObject[] {
  const k = parseYamlDocuments(readFileSync(join(dir, "kustomization.yaml"), "utf8"))[0] as unknown as Kustomization;
  let objects: K8sObject[] = [];
  for (const res of k.resources ?? []) {
    const path = resolve(dir, res);
    objects.push(...(res.endsWith(".yaml") || res.endsWith(".yml") ? parseYamlDocuments(readFileSync(path, "utf8")) : renderKustomization(path)));
  }
  for (const gen of k.configMapGenerator ?? []) {
    const data: Record<string, string> = {};
    for (const file of gen.files ?? []) data[file.split("/").pop()!] = readFileSync(join(dir, file), "utf8");
    const metadata: K8sObject["metadata"] = { name: gen.name };
    if (gen.options?.labels) metadata.labels = { ...gen.options.labels };
    if (gen.options?.annotations) metadata.annotations = { ...gen.options.annotations };
    objects.push({ apiVersion: "v1", kind: "ConfigMap", metadata, data });
  }
  for (const patch of k.patches ?? []) {
    for (const p of parseYamlDocuments(readFileSync(join(dir, patch.path), "utf8"))) {
      const target = objects.find((o) => o.kind === p.kind && o.metadata.name === p.metadata.name);
      if (!target) throw new Error(`patch ${patch.path}: no ${objectId(p)}`);
      objects = objects.map((o) => (o === target ? (strategicMerge(o, p) as K8sObject) : o));
    }
  }
  for (const image of k.images ?? []) objects.forEach((o) => rewriteImages(o, image));
  if (k.namespace) {
    for (const o of objects) if (!CLUSTER_SCOPED.has(o.kind)) o.metadata.namespace = k.namespace;
  }
  return objects;
}

interface Kustomization {
  namespace?: string;
  resources?: string[];
  patches?: { path: string }[];
  images?: { name: string; newName?: string; newTag?: string }[];
  configMapGenerator?: { name: string; files?: string[]; options?: { labels?: Record<string, string>; annotations?: Record<string, string> } }[];
}

const CLUSTER_SCOPED = new Set(["Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "PriorityClass", "StorageClass"]);
/** Lists whose items merge by `name` in strategic merge patches (the ones k8s/ patches). */
const MERGE_BY_NAME = new Set(["containers", "initContainers", "env", "ports", "volumes", "volumeMounts"]);

function strategicMerge(base: unknown, patch: unknown, key = ""): unknown {
  if (Array.isArray(patch)) {
    if (!MERGE_BY_NAME.has(key) || !Array.isArray(base)) return structuredClone(patch);
    // Like kustomize: the patch's items first (merged with their base item), then the other base items.
    const baseItems = base as { name: string }[];
    const patchItems = patch as { name: string }[];
    const patched = patchItems.map((p) => {
      const item = baseItems.find((b) => b.name === p.name);
      return item ? strategicMerge(item, p) : structuredClone(p);
    });
    return [...patched, ...baseItems.filter((b) => !patchItems.some((p) => p.name === b.name))];
  }
  if (patch !== null && typeof patch === "object") {
    const out: Record<string, unknown> = { ...((base as Record<string, unknown>) ?? {}) };
    for (const [k, v] of Object.entries(patch)) out[k] = strategicMerge(out[k], v, k);
    return out;
  }
  return patch;
}

function rewriteImages(node: unknown, image: { name: string; newName?: string; newTag?: string }): void {
  if (Array.isArray(node)) return node.forEach((n) => rewriteImages(n, image));
  if (node === null || typeof node !== "object") return;
  const obj = node as Record<string, unknown>;
  if (typeof obj.image === "string") {
    const [name, tag] = splitImage(obj.image);
    if (name === image.name) obj.image = `${image.newName ?? name}${image.newTag ?? tag ? `:${image.newTag ?? tag}` : ""}`;
  }
  for (const v of Object.values(obj)) rewriteImages(v, image);
}

function splitImage(ref: string): [string, string | undefined] {
  const slash = ref.lastIndexOf("/");
  const colon = ref.lastIndexOf(":");
  return colon > slash ? [ref.slice(0, colon), ref.slice(colon + 1)] : [ref, undefined];
}

export const REPO_ROOT = resolve(__dirname, "..", "..");
export const repoPath = (...parts: string[]) => join(REPO_ROOT, ...parts);
