import { execFileSync, spawnSync } from "node:child_process";
import { Deployment } from "kubernetes-models/apps/v1";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2";
import { Job } from "kubernetes-models/batch/v1";
import { ConfigMap, Secret, Service, ServiceAccount } from "kubernetes-models/v1";
import { Ingress, NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { PrometheusRule, ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
import { kubectlAvailable, kubectlKustomize, objectId, parseYamlDocuments, renderKustomization, repoPath, type K8sObject } from "./kustomize";

/**
 * Renders the chart with a real helm binary when one is installed (`helm` on PATH or HELM_BIN):
 * lint, template with default and production values, validate every object, and compare the
 * default render with k8s/base. Machines without helm rely on the static checks of
 * helm-chart.test.ts; docs/deployment.md says how to install and run helm.
 */
function findHelm(): string | undefined {
  for (const candidate of [process.env.HELM_BIN, "helm"].filter((c): c is string => Boolean(c))) {
    if (spawnSync(candidate, ["version", "--short"], { stdio: "ignore" }).status === 0) return candidate;
  }
  return undefined;
}

const MODELS: Record<string, new (data: any) => { validate(): void }> = {
  "apps/v1/Deployment": Deployment,
  "autoscaling/v2/HorizontalPodAutoscaler": HorizontalPodAutoscaler,
  "batch/v1/Job": Job,
  "v1/ConfigMap": ConfigMap,
  "v1/Secret": Secret,
  "v1/Service": Service,
  "v1/ServiceAccount": ServiceAccount,
  "networking.k8s.io/v1/Ingress": Ingress,
  "networking.k8s.io/v1/NetworkPolicy": NetworkPolicy,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
  "monitoring.coreos.com/v1/PrometheusRule": PrometheusRule,
  "monitoring.coreos.com/v1/ServiceMonitor": ServiceMonitor,
};

const CHART = repoPath("charts", "dataset-export");
const helm = findHelm();
const template = (...args: string[]) =>
  parseYamlDocuments(execFileSync(helm!, ["template", "dataset-export", CHART, "-n", "dataset-export", ...args], { encoding: "utf8", maxBuffer: 64 << 20 }));

/** Drops what only Helm adds: its labels, hook and checksum annotations, the namespace. */
function withoutHelmMetadata(object: K8sObject): unknown {
  const copy = JSON.parse(JSON.stringify(object));
  const clean = (meta: any) => {
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
  clean(copy.metadata);
  clean(copy.spec?.template?.metadata);
  delete copy.metadata.namespace;
  return copy;
}

describe("helm render", () => {
  // Without a helm binary these are reported as skipped, not passed: helm-chart.test.ts checks the
  // chart statically everywhere.
  const withHelm = helm ? it : it.skip;

  withHelm("lints, renders valid objects with default and production values, and equals k8s/base by default", () => {
    for (const values of [["--set", "secrets.existingSecret=dataset-export-secrets"], ["-f", `${CHART}/ci/production-values.yaml`]]) {
      const lint = spawnSync(helm!, ["lint", CHART, ...values], { encoding: "utf8" });
      expect({ status: lint.status, output: lint.status === 0 ? "" : lint.stdout + lint.stderr }).toEqual({ status: 0, output: "" });
      const objects = template(...values);
      expect(objects.length).toBeGreaterThan(25);
      for (const object of objects) {
        const Model = MODELS[`${object.apiVersion}/${object.kind}`];
        expect({ object: objectId(object), known: Boolean(Model) }).toEqual({ object: objectId(object), known: true });
        expect(() => new Model(object).validate()).not.toThrow();
      }
    }
    const rendered = template("--set", "secrets.existingSecret=dataset-export-secrets");
    const base = kubectlAvailable() ? kubectlKustomize(repoPath("k8s", "base")) : renderKustomization(repoPath("k8s", "base"));
    const byId = (objects: K8sObject[]) => Object.fromEntries(objects.map((o) => [objectId(o), withoutHelmMetadata(o)]));
    expect(byId(rendered)).toEqual(byId(base));
  });

  withHelm("refuses to render without secrets, naming the value", () => {
    const result = spawnSync(helm!, ["template", "dataset-export", CHART], { encoding: "utf8" });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain("secrets.databaseUrl is required");
    const inline = template("--set", "secrets.databaseUrl=postgres://u@db:5432/x", "--set", "secrets.keyHashSecret=pepper", "--set", "secrets.cursorKeys=1:0123456789abcdef0123");
    const secrets = inline.filter((o) => o.kind === "Secret").map((o) => o.metadata.name).sort();
    expect(secrets).toEqual(["dataset-export-migrations", "dataset-export-secrets"]);
  });
});
