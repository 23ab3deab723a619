/** The smallest database surface the authenticator needs; a pg Pool satisfies it. */
export interface Queryable {
  query<R = Record<string, unknown>>(text: string, values?: unknown[]): Promise<{ rows: R[] }>;
}

/** What the key store knows about a secret hash. */
export interface StoredKey {
  keyId: string;
  organizationId: string;
  secretHash: string;
  expiresAt: Date | null;
  revokedAt: Date | null;
  organizationKnown: boolean;
  exportEnabled: boolean;
}

/** The key lookup's row, as the query returns it (tests fake the query with it). */
export interface KeyRow {
  id: string;
  organization_id: string;
  secret_hash: string;
  expires_at: Date | null;
  revoked_at: Date | null;
  organization_known: boolean;
  export_enabled: boolean;
}

/** One round trip: the key by its hash, whether its organization exists and is enabled for export. */
export async function findKeyByHash(db: Queryable, secretHash: string): Promise<StoredKey | undefined> {
  const { rows } = await db.query<KeyRow>(
    `SELECT k.id, k.organization_id, k.secret_hash, k.expires_at, k.revoked_at,
            o.id IS NOT NULL AS organization_known,
            COALESCE(e.export_enabled, false) AS export_enabled
       FROM api_keys k
       LEFT JOIN organizations o ON o.id = k.organization_id
       LEFT JOIN export_organizations e ON e.organization_id = k.organization_id
      WHERE k.secret_hash = $1`,
    [secretHash],
  );
  const row = rows[0];
  if (!row) return undefined;
  return {
    keyId: row.id,
    organizationId: row.organization_id,
    secretHash: row.secret_hash,
    expiresAt: row.expires_at,
    revokedAt: row.revoked_at,
    organizationKnown: row.organization_known,
    exportEnabled: row.export_enabled,
  };
}
