import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import type { z } from "zod";
import { ExportctlError } from "../errors";
import { applyDocumentSchema, type ApplyDocument } from "./schema";

/** `suppliers[3].products[1]` from a zod path. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out === "" ? String(part) : `.${String(part)}`;
  }
  return out || "(document)";
}

function describeIssue(issue: z.core.$ZodIssue): string {
  const where = formatPath(issue.path);
  if (issue.code === "unrecognized_keys") return `${where}: unknown field(s) ${issue.keys.map((k) => `'${k}'`).join(", ")}`;
  if (issue.code === "invalid_type" && issue.input === undefined) return `${where}: is required`;
  return `${where}: ${issue.message}`;
}

/** Validates and normalizes an apply document (ids lower-cased, enum names mapped). */
export function parseApplyDocument(raw: unknown): ApplyDocument {
  const result = applyDocumentSchema.safeParse(raw);
  if (!result.success) {
    throw new ExportctlError("INVALID_DOCUMENT", "The apply document is invalid; nothing was loaded.", result.error.issues.map(describeIssue));
  }
  return result.data;
}

/**
 * Reads a document from a file (or stdin for "-"). JSON when the name ends in .json or the text
 * starts with '{'; YAML otherwise (YAML 1.2 is a superset of JSON, so either way JSON parses).
 */
export function readDocumentText(text: string, name: string): unknown {
  const looksJson = name.toLowerCase().endsWith(".json") || text.trimStart().startsWith("{");
  if (looksJson) {
    try {
      return JSON.parse(text);
    } catch (err) {
      throw new ExportctlError("INVALID_DOCUMENT", `${name}: not valid JSON: ${(err as Error).message}`);
    }
  }
  const docs = parseAllDocuments(text, { prettyErrors: true });
  if (!Array.isArray(docs)) return null;
  if (docs.length !== 1) throw new ExportctlError("INVALID_DOCUMENT", `${name}: expected exactly one YAML document, found ${docs.length}`);
  const [doc] = docs;
  if (doc.errors.length > 0) {
    throw new ExportctlError("INVALID_DOCUMENT", `${name}: not valid YAML`, doc.errors.map((e) => e.message.split("\n")[0]));
  }
  return doc.toJS({ maxAliasCount: 1000 });
}

export function readDocumentFile(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file === "-" ? 0 : file, "utf8");
  } catch (err) {
    throw new ExportctlError("INVALID_ARGUMENT", `cannot read ${file === "-" ? "stdin" : file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  return readDocumentText(text, file === "-" ? "stdin" : file);
}
