import { parseConfig } from "@exportsvc/common";
import { z } from "zod";

/** DATABASE_URL: the service database (source model + service tables). */
export function databaseConfig(env: Record<string, string | undefined> = process.env): { databaseUrl: string } {
  const c = parseConfig(z.object({ DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, "must be a postgres:// URL") }), env);
  return { databaseUrl: c.DATABASE_URL };
}

/** KEY_HASH_SECRET: the pepper of stored key hashes; must equal the gateway's. Needed to issue keys. */
export function keyHashConfig(env: Record<string, string | undefined> = process.env): { keyHashSecret: string } {
  const c = parseConfig(z.object({ KEY_HASH_SECRET: z.string().min(16, "must be at least 16 characters (the gateway's value)") }), env);
  return { keyHashSecret: c.KEY_HASH_SECRET };
}
