import "../support/linked/kubernetes-models";
import { Deployment } from "kubernetes-models/apps/v1";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2";
import { Job } from "kubernetes-models/batch/v1";
import { ConfigMap, Namespace, Service, ServiceAccount } from "kubernetes-models/v1";
import { Ingress, NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { PrometheusRule, ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
import { kubectlKustomize, objectId, repoPath, type K8sObject } from "./kustomize";

/**
 * Every object of k8s/ (base, generated from the chart, and the hand-written production overlay)
 * is rendered with the lockfile's `kubectl kustomize` and validated against the Kubernetes and
 * prometheus-operator schemas of the kubernetes-models packages.
 */
const MODELS: Record<string, new (data: any) => { validate(): void }> = {
  "apps/v1/Deployment": Deployment,
  "autoscaling/v2/HorizontalPodAutoscaler": HorizontalPodAutoscaler,
  "batch/v1/Job": Job,
  "v1/ConfigMap": ConfigMap,
  "v1/Namespace": Namespace,
  "v1/Service": Service,
  "v1/ServiceAccount": ServiceAccount,
  "networking.k8s.io/v1/Ingress": Ingress,
  "networking.k8s.io/v1/NetworkPolicy": NetworkPolicy,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
  "monitoring.coreos.com/v1/PrometheusRule": PrometheusRule,
  "monitoring.coreos.com/v1/ServiceMonitor": ServiceMonitor,
};

const COMPONENTS = ["gateway", "catalog", "export", "schema"];
const KUSTOMIZATIONS = ["k8s/base", "k8s/overlays/production"];
const rendered = Object.fromEntries(KUSTOMIZATIONS.map((dir) => [dir, kubectlKustomize(repoPath(dir))]));

type Container = {
  name: string;
  image: string;
  ports?: { name: string; containerPort: number }[];
  securityContext?: Record<string, any>;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  readinessProbe?: Record<string, any>;
  livenessProbe?: Record<string, any>;
  envFrom?: { configMapRef?: { name: string } }[];
  env?: { name: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
};
type PodSpec = { containers: Container[]; securityContext?: Record<string, any>; automountServiceAccountToken?: boolean };
const podSpec = (o: K8sObject) => (o.spec as { template: { spec: PodSpec; metadata: { labels: Record<string, string> } } }).template;
const find = (objects: K8sObject[], kind: string, name: string) => objects.find((o) => o.kind === kind && o.metadata.name === name);

describe.each(KUSTOMIZATIONS)("%s", (dir) => {
  const objects = rendered[dir];

  it("validates every object against its Kubernetes schema", () => {
    expect(objects.length).toBeGreaterThan(20);
    for (const object of objects) {
      const Model = MODELS[`${object.apiVersion}/${object.kind}`];
      expect({ object: objectId(object), known: Boolean(Model) }).toEqual({ object: objectId(object), known: true });
      expect(() => new Model(object).validate()).not.toThrow();
    }
    const ids = objects.map(objectId);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("has a Deployment, Service, PodDisruptionBudget and NetworkPolicy per service, an Ingress for the gateway only", () => {
    for (const c of COMPONENTS) {
      for (const kind of ["Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy", "ConfigMap"]) {
        expect(find(objects, kind, `dataset-export-${c}`)).toBeDefined();
      }
    }
    const ingresses = objects.filter((o) => o.kind === "Ingress");
    expect(ingresses).toHaveLength(1);
    const backend = (ingresses[0].spec as any).rules[0].http.paths[0].backend.service;
    expect(backend).toEqual({ name: "dataset-export-gateway", port: { name: "http" } });
    const annotations = ingresses[0].metadata.annotations as Record<string, string>;
    expect(Number(annotations["nginx.ingress.kubernetes.io/limit-rps"])).toBeGreaterThan(0);
    expect(Number(annotations["nginx.ingress.kubernetes.io/limit-connections"])).toBeGreaterThan(0);
    expect((ingresses[0].spec as any).tls[0].secretName).toBeTruthy();
    expect(objects.filter((o) => o.kind === "Job").map((o) => podSpec(o).spec.containers[0].image)).toHaveLength(1);
  });

  it("runs every container as non-root on a read-only root filesystem without capabilities, with limits and probes", () => {
    for (const o of objects.filter((x) => x.kind === "Deployment" || x.kind === "Job")) {
      const spec = podSpec(o).spec;
      expect(spec.securityContext?.runAsNonRoot).toBe(true);
      expect(spec.automountServiceAccountToken).toBe(false);
      for (const container of spec.containers) {
        expect(container.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } });
        expect(container.resources?.limits?.memory).toBeTruthy();
        expect(container.resources?.requests?.cpu).toBeTruthy();
        if (o.kind === "Deployment") {
          expect(container.readinessProbe).toBeDefined();
          expect(container.livenessProbe).toBeDefined();
        }
      }
    }
  });

  it("probes the gateway over HTTP (/health, /health/ready) and internal services with gRPC health checks", () => {
    const gateway = podSpec(find(objects, "Deployment", "dataset-export-gateway")!).spec.containers[0];
    expect(gateway.livenessProbe?.httpGet).toMatchObject({ path: "/health", port: "http" });
    expect(gateway.readinessProbe?.httpGet).toMatchObject({ path: "/health/ready", port: "http" });
    for (const c of ["catalog", "export", "schema"]) {
      const container = podSpec(find(objects, "Deployment", `dataset-export-${c}`)!).spec.containers[0];
      const grpcPort = container.ports!.find((p) => p.name === "grpc")!.containerPort;
      expect(container.readinessProbe?.grpc).toEqual({ port: grpcPort });
      expect(container.livenessProbe?.grpc).toEqual({ port: grpcPort });
    }
  });

  it("wires Services to pods and named ports, and addresses between services to real Services", () => {
    for (const c of COMPONENTS) {
      const service = find(objects, "Service", `dataset-export-${c}`)!.spec as { selector: Record<string, string>; ports: { name: string; port: number; targetPort: string }[] };
      const template = podSpec(find(objects, "Deployment", `dataset-export-${c}`)!);
      expect(template.metadata.labels).toMatchObject(service.selector);
      const containerPorts = template.spec.containers[0].ports!;
      for (const port of service.ports) {
        const target = containerPorts.find((p) => p.name === port.targetPort);
        expect(target?.containerPort).toBe(port.port);
      }
      expect(service.ports.map((p) => p.name)).toContain("metrics");
      const config = (find(objects, "ConfigMap", `dataset-export-${c}`)!.data ?? {}) as Record<string, string>;
      expect(Number(config.METRICS_PORT)).toBe(containerPorts.find((p) => p.name === "metrics")!.containerPort);
      for (const [variable, value] of Object.entries(config).filter(([k]) => k.endsWith("_ADDRESS"))) {
        const [host, port] = value.split(":");
        const target = find(objects, "Service", host);
        expect({ variable, service: Boolean(target) }).toEqual({ variable, service: true });
        expect((target!.spec as any).ports.find((p: { name: string }) => p.name === "grpc").port).toBe(Number(port));
      }
    }
  });

  it("admits internal gRPC only from the gateway, and to schema only from catalog and export", () => {
    const callersOf = (c: string) => {
      const policy = find(objects, "NetworkPolicy", `dataset-export-${c}`)!.spec as any;
      const apiRule = policy.ingress.find((r: any) => r.ports.some((p: any) => p.port !== "metrics"));
      return apiRule.from.map((f: any) => f.podSelector?.matchLabels?.["app.kubernetes.io/component"] ?? "namespace");
    };
    expect(callersOf("catalog")).toEqual(["gateway"]);
    expect(callersOf("export")).toEqual(["gateway"]);
    expect(callersOf("schema").sort()).toEqual(["catalog", "export"]);
    expect(callersOf("gateway")).toEqual(["namespace"]);
  });

  it("gives secrets only to the services that need them", () => {
    const secretKeys = (c: string) =>
      (podSpec(find(objects, "Deployment", `dataset-export-${c}`)!).spec.containers[0].env ?? [])
        .filter((e) => e.valueFrom?.secretKeyRef)
        .map((e) => e.name)
        .sort();
    expect(secretKeys("gateway")).toEqual(["DATABASE_URL", "KEY_HASH_SECRET", "REDIS_URL"]);
    expect(secretKeys("export")).toEqual(["CURSOR_KEYS", "DATABASE_READ_URL", "DATABASE_URL"]);
    expect(secretKeys("catalog")).toEqual(["DATABASE_READ_URL", "DATABASE_URL"]);
    expect(secretKeys("schema")).toEqual(["CURSOR_KEYS", "DATABASE_URL"]);
  });
});

describe("production overlay", () => {
  const objects = rendered["k8s/overlays/production"];

  it("puts everything in its namespace with pinned images", () => {
    for (const o of objects.filter((x) => x.kind !== "Namespace")) expect(o.metadata.namespace).toBe("dataset-export");
    for (const o of objects.filter((x) => x.kind === "Deployment" || x.kind === "Job")) {
      for (const c of podSpec(o).spec.containers) expect(c.image).toMatch(/^registry\.example\.com\/platform\/dataset-export-[a-z]+:1\.4\.0$/);
    }
  });

  it("enables tracing and raises capacity", () => {
    const config = find(objects, "ConfigMap", "dataset-export-export")!.data as Record<string, string>;
    expect(config.OTEL_EXPORTER_OTLP_ENDPOINT).toMatch(/^http:\/\//);
    expect(config.DATABASE_POOL_MAX).toBe("20");
    expect((find(objects, "HorizontalPodAutoscaler", "dataset-export-gateway")!.spec as any).minReplicas).toBe(3);
  });
});
