import { generateApiKey, hashApiKeySecret, hashesEqual, keyHashSecretVerifier } from "@exportsvc/common";
import { ApiKeySchema, type ApiKey, type MikroORM } from "@exportsvc/db";
import { ExportctlError } from "./errors";
import { requireUuid } from "./organizations";

export interface IssuedApiKey {
  keyId: string;
  /** The bearer secret: shown once, never stored. */
  secret: string;
  organizationId: string;
  description: string;
  expiresAt: string | null;
  /** Whether the organization is enabled for export (a key of a disabled one gets 404s). */
  organizationExportEnabled: boolean;
}

export interface KeySummary {
  keyId: string;
  organizationId: string;
  description: string;
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
  state: "active" | "expired" | "revoked";
}

function parseExpiry(value: string | undefined): Date | null {
  if (value === undefined) return null;
  const at = new Date(value);
  if (!/^\d{4}-\d{2}-\d{2}/.test(value) || Number.isNaN(at.getTime())) {
    throw new ExportctlError("INVALID_ARGUMENT", `--expires-at must be an ISO 8601 date or instant, got '${value}'`);
  }
  if (at.getTime() <= Date.now()) throw new ExportctlError("INVALID_ARGUMENT", `--expires-at ${value} is in the past`);
  return at;
}

/**
 * Compares KEY_HASH_SECRET with the verifier recorded by the first check against this database
 * (recording it when there is none yet). A mismatch means keys issued now would never authenticate.
 */
export async function checkKeyHashSecret(orm: MikroORM, keyHashSecret: string): Promise<{ recorded: boolean }> {
  const connection = orm.em.fork().getConnection();
  const verifier = keyHashSecretVerifier(keyHashSecret);
  const inserted = await connection.execute<{ verifier: string }[]>(
    "INSERT INTO key_hash_secret_verifier (verifier) VALUES (?) ON CONFLICT (singleton) DO NOTHING RETURNING verifier",
    [verifier],
  );
  if (inserted.length === 1) return { recorded: true };
  const [stored] = await connection.execute<{ verifier: string; recorded_at: Date }[]>("SELECT verifier, recorded_at FROM key_hash_secret_verifier");
  if (!hashesEqual(stored.verifier, verifier)) {
    throw new ExportctlError(
      "KEY_HASH_SECRET_MISMATCH",
      `KEY_HASH_SECRET is not the secret this database's keys are hashed with (recorded ${new Date(stored.recorded_at).toISOString()}); ` +
        "a key issued with it would answer 401. Use the gateway's KEY_HASH_SECRET. Nothing was issued.",
    );
  }
  return { recorded: false };
}

/** Issues a key for an organization; only the keyed hash of the secret is stored. */
export async function issueKey(
  orm: MikroORM,
  opts: { organizationId: string; description: string; expiresAt?: string; keyHashSecret: string },
): Promise<IssuedApiKey> {
  const organizationId = requireUuid(opts.organizationId, "--org");
  const description = opts.description.trim();
  if (description === "") throw new ExportctlError("INVALID_ARGUMENT", "--description must not be empty (it says who the key is for)");
  const expiresAt = parseExpiry(opts.expiresAt);
  const em = orm.em.fork();
  const org = await em
    .getConnection()
    .execute<{ enabled: boolean | null }[]>(
      "SELECT e.export_enabled AS enabled FROM organizations o LEFT JOIN export_organizations e ON e.organization_id = o.id WHERE o.id = ?",
      [organizationId],
    );
  if (org.length === 0) throw new ExportctlError("NOT_FOUND", `organization ${organizationId} does not exist`);
  const issued = generateApiKey();
  const key = em.create(ApiKeySchema, {
    id: issued.id,
    organizationId,
    secretHash: hashApiKeySecret(issued.secret, opts.keyHashSecret),
    description,
    createdAt: new Date(),
    expiresAt,
    revokedAt: null,
  });
  await em.persist(key).flush();
  return {
    keyId: issued.id,
    secret: issued.secret,
    organizationId,
    description,
    expiresAt: expiresAt?.toISOString() ?? null,
    organizationExportEnabled: org[0].enabled === true,
  };
}

function summarize(k: ApiKey, now = Date.now()): KeySummary {
  const state = k.revokedAt ? "revoked" : k.expiresAt && k.expiresAt.getTime() <= now ? "expired" : "active";
  return {
    keyId: k.id,
    organizationId: k.organizationId,
    description: k.description,
    createdAt: k.createdAt.toISOString(),
    expiresAt: k.expiresAt?.toISOString() ?? null,
    revokedAt: k.revokedAt?.toISOString() ?? null,
    state,
  };
}

/** Keys (never their secrets or hashes), newest first. */
export async function listKeys(orm: MikroORM, opts: { organizationId?: string } = {}): Promise<KeySummary[]> {
  const em = orm.em.fork();
  const where = opts.organizationId ? { organizationId: requireUuid(opts.organizationId, "--org") } : {};
  const keys = await em.find(ApiKeySchema, where, { orderBy: { createdAt: "DESC", id: "ASC" } });
  return keys.map((k) => summarize(k));
}

/** Revokes a key; revoking an already revoked key keeps its first revocation time. */
export async function revokeKey(orm: MikroORM, keyId: string): Promise<KeySummary & { changed: boolean }> {
  const em = orm.em.fork();
  const key = await em.findOne(ApiKeySchema, { id: keyId });
  if (!key) throw new ExportctlError("NOT_FOUND", `no API key with id '${keyId}'`);
  const changed = !key.revokedAt;
  if (changed) {
    key.revokedAt = new Date();
    await em.flush();
  }
  return { ...summarize(key), changed };
}
