-- Organizations whose dataset registry must be brought up to date by the schema service.
-- Filled by triggers on whatever shapes the registry (custom attribute definitions, an organization
-- being set up for export); each insert also NOTIFYs 'registry_sync' with the organization id so a
-- listening schema service reacts at once (polling is the fallback). A worker claims rows with
-- FOR UPDATE SKIP LOCKED, syncs, and deletes the row in the same transaction.
CREATE TABLE registry_sync_queue (
  organization_id uuid PRIMARY KEY,
  requested_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX registry_sync_queue_requested ON registry_sync_queue (requested_at);

-- Statement-level: one queue row and one notification per organization a statement touched.
-- ON CONFLICT DO UPDATE (not DO NOTHING) on purpose: while a sync holds the row it waits for that
-- sync to finish, then re-queues, so a change committed during a sync is never lost.
CREATE FUNCTION request_registry_sync() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  org uuid;
BEGIN
  FOR org IN
    SELECT DISTINCT organization_id FROM (
      SELECT organization_id FROM changed_rows
    ) AS touched ORDER BY organization_id
  LOOP
    INSERT INTO registry_sync_queue (organization_id, requested_at) VALUES (org, clock_timestamp())
      ON CONFLICT (organization_id) DO UPDATE SET requested_at = excluded.requested_at;
    PERFORM pg_notify('registry_sync', org::text);
  END LOOP;
  RETURN NULL;
END $$;

CREATE TRIGGER custom_attribute_definitions_registry_ins AFTER INSERT ON custom_attribute_definitions
  REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION request_registry_sync();
CREATE TRIGGER custom_attribute_definitions_registry_upd AFTER UPDATE ON custom_attribute_definitions
  REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION request_registry_sync();
CREATE TRIGGER custom_attribute_definitions_registry_del AFTER DELETE ON custom_attribute_definitions
  REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION request_registry_sync();
CREATE TRIGGER export_organizations_registry_ins AFTER INSERT ON export_organizations
  REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION request_registry_sync();
