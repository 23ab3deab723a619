import Ajv, { type ValidateFunction } from "ajv";

/**
 * Validates live responses against the OpenAPI document the gateway serves: the body schema of the
 * documented response for (path, method, status, media type). OpenAPI 3.0 schemas are JSON Schema
 * with a few extra keywords (nullable, example), which Ajv is told to accept.
 */
export class OpenApiValidator {
  private readonly ajv = new Ajv({ strict: false, allErrors: true });
  private readonly cache = new Map<string, ValidateFunction>();

  constructor(private readonly doc: any) {
    this.ajv.addSchema({ $id: "openapi", components: doc.components }, "openapi");
  }

  static async fetch(baseUrl: string): Promise<OpenApiValidator> {
    const res = await fetch(`${baseUrl}/swagger/v1/swagger.json`);
    if (res.status !== 200) throw new Error(`OpenAPI document: HTTP ${res.status}`);
    return new OpenApiValidator(await res.json());
  }

  /** Throws when the status is not documented for the operation or the body does not match its schema. */
  validate(path: string, method: "get", status: number, mediaType: string, body: unknown): void {
    const operation = this.doc.paths?.[path]?.[method];
    if (!operation) throw new Error(`${method.toUpperCase()} ${path} is not documented`);
    const response = operation.responses?.[String(status)] ?? operation.responses?.default;
    if (!response) throw new Error(`${method.toUpperCase()} ${path}: status ${status} is not documented`);
    const content = response.content?.[mediaType];
    if (!content) throw new Error(`${method.toUpperCase()} ${path} ${status}: media type ${mediaType} is not documented`);
    if (!content.schema || body === undefined) return;
    const key = `${path} ${method} ${status} ${mediaType}`;
    let validate = this.cache.get(key);
    if (!validate) {
      validate = this.ajv.compile(rewriteRefs(content.schema) as object);
      this.cache.set(key, validate);
    }
    if (!validate(body)) {
      throw new Error(`${key}: response does not match the documented schema: ${this.ajv.errorsText(validate.errors)}`);
    }
  }
}

/** Points local `#/components/...` references at the registered document. */
function rewriteRefs(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(rewriteRefs);
  if (schema && typeof schema === "object") {
    return Object.fromEntries(
      Object.entries(schema).map(([k, v]) => [k, k === "$ref" && typeof v === "string" && v.startsWith("#/") ? `openapi${v}` : rewriteRefs(v)]),
    );
  }
  return schema;
}
