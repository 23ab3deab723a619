import { execFileSync } from "node:child_process";
import { join, resolve } from "node:path";
import { parseAllDocuments } from "yaml";

/**
 * The Helm chart as the one source of the deployment: `helm template` of charts/dataset-export,
 * read as plain objects. k8s/base (scripts/k8s-render.ts), the deploy tests and the podman stack
 * (test/deploy/images) all take their objects from here instead of restating the chart.
 */

export const REPO_ROOT = resolve(__dirname, "..", "..");
export const CHART_DIR = join(REPO_ROOT, "charts", "dataset-export");

/** Release name and namespace of the plain manifests (k8s/base) and of the tests' renders. */
export const RELEASE = "dataset-export";

/** The chart's defaults with the Secret created out of band (the only value without a usable default). */
export const DEFAULT_VALUE_ARGS = ["--set", `secrets.existingSecret=${RELEASE}-secrets`];

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

/** `helm template <RELEASE> charts/dataset-export -n <RELEASE> <args>` with the given helm binary. */
export function helmTemplate(helm: string, args: string[] = DEFAULT_VALUE_ARGS): K8sObject[] {
  const text = execFileSync(helm, ["template", RELEASE, CHART_DIR, "--namespace", RELEASE, ...args], {
    encoding: "utf8",
    maxBuffer: 64 << 20,
    stdio: ["ignore", "pipe", "pipe"],
  });
  return parseYamlDocuments(text);
}

/**
 * A copy of `object` without what only a Helm release carries: the helm.sh/chart and managed-by
 * labels, hook and checksum annotations (kubectl applies no hooks, and nothing recomputes the
 * checksums), and the namespace (kustomize overlays set it).
 */
export function withoutHelmMetadata<T extends K8sObject>(object: T): T {
  const copy = structuredClone(object);
  const clean = (meta: { labels?: Record<string, string>; annotations?: Record<string, string> } | undefined) => {
    if (!meta) return;
    if (meta.labels) {
      delete meta.labels["helm.sh/chart"];
      delete meta.labels["app.kubernetes.io/managed-by"];
    }
    if (meta.annotations) {
      for (const key of Object.keys(meta.annotations)) if (key.startsWith("checksum/") || key.startsWith("helm.sh/")) delete meta.annotations[key];
      if (Object.keys(meta.annotations).length === 0) delete meta.annotations;
    }
  };
  clean(copy.metadata as Parameters<typeof clean>[0]);
  clean((copy.spec as { template?: { metadata?: Parameters<typeof clean>[0] } } | undefined)?.template?.metadata);
  delete copy.metadata.namespace;
  return copy;
}

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean } };
}

export interface RenderedContainer {
  name: string;
  image: string;
  command?: string[];
  envFrom?: { configMapRef?: { name: string } }[];
  env?: EnvVar[];
}
export interface PodSpec {
  containers: RenderedContainer[];
  terminationGracePeriodSeconds?: number;
}

/** The Deployment or Job of a component (its app.kubernetes.io/component label) in a render. */
export function workloadOf(objects: K8sObject[], component: string): K8sObject & { spec: { template: { spec: PodSpec } } } {
  const workload = objects.find(
    (o) => (o.kind === "Deployment" || o.kind === "Job") && (o.metadata.labels as Record<string, string> | undefined)?.["app.kubernetes.io/component"] === component,
  );
  if (!workload) throw new Error(`the render has no Deployment or Job of component ${component}`);
  return workload as K8sObject & { spec: { template: { spec: PodSpec } } };
}

/**
 * The environment the rendered objects give one component's (first) container: its ConfigMaps
 * (envFrom) overlaid with its `env`, secretKeyRefs resolved from `secrets` (by key). An optional
 * secret key absent from `secrets` is left out, as Kubernetes does; a required one is an error.
 */
export function containerEnvironment(objects: K8sObject[], component: string, secrets: Record<string, string | undefined>): Record<string, string> {
  const named = (kind: string, name: string) => objects.find((o) => o.kind === kind && o.metadata.name === name);
  const deployment = workloadOf(objects, component);
  const container = deployment.spec.template.spec.containers[0];
  const env: Record<string, string> = {};
  for (const source of container.envFrom ?? []) {
    const name = source.configMapRef?.name;
    const configMap = name ? named("ConfigMap", name) : undefined;
    if (!configMap) throw new Error(`${objectId(deployment)}: envFrom names ConfigMap ${name}, which the render lacks`);
    Object.assign(env, configMap.data as Record<string, string>);
  }
  for (const variable of container.env ?? []) {
    const ref = variable.valueFrom?.secretKeyRef;
    if (!ref) {
      if (variable.value !== undefined) env[variable.name] = variable.value;
      continue;
    }
    const secret = secrets[ref.key];
    if (secret !== undefined) env[variable.name] = secret;
    else if (!ref.optional) throw new Error(`${objectId(deployment)}: ${variable.name} needs secret key ${ref.key}, which was not given`);
  }
  return env;
}
