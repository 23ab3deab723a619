-- Issue 15: a form dataset's rows may carry their signed `_cursor`, computed when the row is
-- materialized (column `signed_cursor` of the table) instead of on every page: signing was a third of
-- a page query's database time. NULL: the table stores no cursors (built without CURSOR_KEYS in the
-- schema service, or before this migration). Otherwise CursorCodec.storedSignature() of the key and
-- binding that signed them; the export serves them only when its own keyring derives the same
-- signature, and computes a row's cursor wherever its stored one is NULL (packages/datasets cursor.ts).
ALTER TABLE form_ds.dataset_tables ADD COLUMN cursor_signature text;
