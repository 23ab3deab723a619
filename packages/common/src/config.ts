import { z } from "zod";

/**
 * Parses process.env against a zod schema once at start-up. On failure it throws a ConfigError
 * naming every variable at fault, so main() can print it and exit non-zero.
 */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
  }
}

export function parseConfig<S extends z.ZodObject<z.ZodRawShape>>(
  schema: S,
  env: Record<string, string | undefined> = process.env,
): z.infer<S> {
  const result = schema.safeParse(env);
  if (!result.success) {
    throw new ConfigError(
      result.error.issues.map((i) => `${i.path.join(".") || "(environment)"}: ${i.message}`),
    );
  }
  return result.data;
}

/** Reusable variable parsers. */
export const env = {
  port: (def: number) => z.coerce.number().int().min(0).max(65535).default(def),
  /** A port that may be left unset (e.g. METRICS_PORT: unset = that server does not start). */
  optionalPort: () => z.coerce.number().int().min(0).max(65535).optional(),
  int: (def: number, min = 0, max = Number.MAX_SAFE_INTEGER) => z.coerce.number().int().min(min).max(max).default(def),
  url: () => z.string().url(),
  optionalString: () =>
    z
      .string()
      .optional()
      .transform((v) => (v === undefined || v === "" ? undefined : v)),
  bool: (def: boolean) =>
    z
      .enum(["true", "false", "1", "0", "yes", "no"])
      .optional()
      .transform((v) => (v === undefined ? def : ["true", "1", "yes"].includes(v))),
  logLevel: () => z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  /** A required value turned into T by `parse`; what it throws is the variable's message. */
  parsed: <T>(parse: (text: string) => T) => z.string().transform((text, ctx) => parsedOrIssue(parse, text, ctx)),
  /** As `parsed`, but unset or empty is undefined. */
  optionalParsed: <T>(parse: (text: string) => T) =>
    z
      .string()
      .optional()
      .transform((text, ctx) => (text === undefined || text === "" ? undefined : parsedOrIssue(parse, text, ctx))),
};

function parsedOrIssue<T>(parse: (text: string) => T, text: string, ctx: z.RefinementCtx): T {
  try {
    return parse(text);
  } catch (err) {
    ctx.addIssue({ code: "custom", message: (err as Error).message });
    return z.NEVER;
  }
}

/** Runs main, printing configuration errors without a stack trace. */
export function runMain(main: () => Promise<void>): void {
  main().catch((err: unknown) => {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
    } else {
      process.stderr.write(`fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    }
    process.exit(1);
  });
}
