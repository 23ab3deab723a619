import { rowsBinding, STORED_CURSOR_COLUMN, type CursorBinding, type CursorCodec, type CursorKey } from "@exportsvc/datasets";
import type { DatasetPlan } from "./derive";

/**
 * How a materialized table's rows get their signed `_cursor` stored (column STORED_CURSOR_COLUMN,
 * migration 100): computed once when a row is written instead of on every page. The table records
 * the signature (form_ds.dataset_tables.cursor_signature); the export serves stored cursors only
 * when its keyring derives the same one, and computes any that are missing.
 */
export interface StoredCursorSigning {
  codec: CursorCodec;
  key: CursorKey;
  binding: CursorBinding;
  signature: string;
}

/** A new table signs with the keyring's signing key; no codec (CURSOR_KEYS unset): it stores none. */
export function signingForNewTable(codec: CursorCodec | undefined, orgId: string, plan: DatasetPlan): StoredCursorSigning | undefined {
  if (!codec) return undefined;
  const binding = rowsBinding(orgId, plan);
  return { codec, key: codec.keyring.signing, binding, signature: codec.storedSignature(binding) };
}

/**
 * Rows written into an existing table are signed as the table's others were, when this keyring has
 * that key; otherwise they are written without (NULL: the export computes theirs).
 */
export function signingForTable(codec: CursorCodec | undefined, signature: string | null, orgId: string, plan: DatasetPlan): StoredCursorSigning | undefined {
  if (!codec || !signature) return undefined;
  const binding = rowsBinding(orgId, plan);
  const key = codec.keyForStoredSignature(signature, binding);
  return key ? { codec, key, binding, signature } : undefined;
}

/** The table's stored-cursor column, or none. */
export const storedCursorColumns = (signing: StoredCursorSigning | undefined): string[] => (signing ? [STORED_CURSOR_COLUMN] : []);
