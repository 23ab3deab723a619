/**
 * The api_keys table's statements, beside its entity (entities.ts, ApiKeySchema, which exportctl
 * issues and revokes keys through): the gateway's key check calls findKeyByHash, exportctl counts an
 * organization's active keys with countActiveKeys. One owner, so "active" means one thing.
 */

/** The smallest database surface the key look-up needs; a pg Pool satisfies it. */
export interface KeyStoreQueryable {
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
export async function findKeyByHash(db: KeyStoreQueryable, secretHash: string): Promise<StoredKey | undefined> {
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

/** A key that can authenticate now: neither revoked nor expired (`alias` names the api_keys row). */
export const activeKeyCondition = (alias: string) => `${alias}.revoked_at IS NULL AND (${alias}.expires_at IS NULL OR ${alias}.expires_at > now())`;

/** Keys of the organization that can authenticate now. */
export async function countActiveKeys(db: KeyStoreQueryable, organizationId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM api_keys k WHERE k.organization_id = $1 AND ${activeKeyCondition("k")}`, [organizationId]);
  return rows[0].n;
}
