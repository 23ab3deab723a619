import Ajv, { type ValidateFunction } from "ajv";
import addFormats from "ajv-formats";

/**
 * Validates values against the OpenAPI document the gateway serves, strictly: Ajv in strict mode
 * (unknown keywords, ambiguous types and unknown formats are errors) with ajv-formats, so a
 * `format` the API does not honour is caught the way validating proxies and generated clients catch it.
 * OpenAPI 3.0 schema objects are JSON Schema plus a few keywords the document does not use.
 */
export class OpenApiValidator {
  private readonly ajv = new Ajv({ strict: true, allErrors: true });
  private readonly cache = new Map<string, ValidateFunction>();

  constructor(private readonly doc: any) {
    addFormats(this.ajv);
    this.ajv.addSchema({ $id: "openapi", $defs: rewriteRefs(doc.components?.schemas ?? {}) }, "openapi");
  }

  static async fetch(baseUrl: string): Promise<OpenApiValidator> {
    const res = await fetch(`${baseUrl}/swagger/v1/swagger.json`);
    if (res.status !== 200) throw new Error(`OpenAPI document: HTTP ${res.status}`);
    return new OpenApiValidator(await res.json());
  }

  /** Throws when the status is not documented for the operation or the body does not match its schema. */
  validate(path: string, method: "get", status: number, mediaType: string, body: unknown): void {
    const operation = this.operation(path, method);
    const response = operation.responses?.[String(status)] ?? operation.responses?.default;
    if (!response) throw new Error(`${method.toUpperCase()} ${path}: status ${status} is not documented`);
    const content = response.content?.[mediaType];
    if (!content) throw new Error(`${method.toUpperCase()} ${path} ${status}: media type ${mediaType} is not documented`);
    if (!content.schema || body === undefined) return;
    this.check(`${path} ${method} ${status} ${mediaType}`, content.schema, body);
  }

  /** Throws when a query/path/header parameter value does not match the parameter's documented schema. */
  validateParameter(path: string, method: "get", name: string, value: unknown): void {
    const parameter = (this.operation(path, method).parameters ?? []).find((p: { name: string }) => p.name === name);
    if (!parameter) throw new Error(`${method.toUpperCase()} ${path}: parameter ${name} is not documented`);
    this.check(`${path} ${method} parameter ${name}`, parameter.schema, value);
  }

  /** Whether a value matches a schema (references resolved against the document). */
  matches(key: string, schema: unknown, value: unknown): { valid: boolean; errors: string } {
    let validate = this.cache.get(key);
    if (!validate) {
      validate = this.ajv.compile(rewriteRefs(schema) as object);
      this.cache.set(key, validate);
    }
    const valid = validate(value) as boolean;
    return { valid, errors: valid ? "" : this.ajv.errorsText(validate.errors) };
  }

  private check(key: string, schema: unknown, value: unknown): void {
    const { valid, errors } = this.matches(key, schema, value);
    if (!valid) throw new Error(`${key}: ${JSON.stringify(value)?.slice(0, 200)} does not match the documented schema: ${errors}`);
  }

  private operation(path: string, method: "get"): any {
    const operation = this.doc.paths?.[path]?.[method];
    if (!operation) throw new Error(`${method.toUpperCase()} ${path} is not documented`);
    return operation;
  }
}

/** Points local `#/components/schemas/...` references at the registered schemas. */
function rewriteRefs(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(rewriteRefs);
  if (schema && typeof schema === "object") {
    return Object.fromEntries(
      Object.entries(schema).map(([k, v]) => [k, k === "$ref" && typeof v === "string" && v.startsWith("#/components/schemas/") ? `openapi#/$defs/${v.slice(21)}` : rewriteRefs(v)]),
    );
  }
  return schema;
}
