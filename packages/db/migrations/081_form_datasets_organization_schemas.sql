-- Form dataset tables move from the shared schema form_ds into one schema per organization,
-- form_ds_<organization id without dashes> (packages/form-datasets organizationSchemaName), the unit
-- of Citus schema-based sharding (docs/scale-out.md). New builds write there; form_ds keeps the
-- registry of tables (form_ds.dataset_tables) and the functions.
--
-- Tables built before this migration stay where they are and keep working (the registry stores
-- schema-qualified names): the next rebuild of their form writes the new generation into the
-- organization's schema and retires the old table. Frozen (deleted) forms are never rebuilt, so
-- this function moves what is left, a bounded number of tables per call (each move takes an
-- ACCESS EXCLUSIVE lock on the table until the caller commits; ALTER TABLE SET SCHEMA is a catalog
-- change, it does not copy rows). Run it until it returns 0 (docs/scale-out.md, "Moving existing tables").
CREATE FUNCTION form_ds.move_tables_to_organization_schemas(max_tables integer DEFAULT 100) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  target text;
  moved_name text;
  moved integer := 0;
BEGIN
  FOR r IN
    SELECT organization_id, table_name FROM form_ds.dataset_tables
     WHERE table_name LIKE 'form\_ds.%' AND NOT staged
     ORDER BY organization_id, table_name
     LIMIT max_tables
       FOR UPDATE SKIP LOCKED
  LOOP
    target := 'form_ds_' || replace(r.organization_id::text, '-', '');
    EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I', target);
    IF to_regclass(r.table_name) IS NOT NULL THEN
      EXECUTE format('ALTER TABLE %s SET SCHEMA %I', r.table_name, target);
    END IF;
    moved_name := target || '.' || split_part(r.table_name, '.', 2);
    UPDATE form_ds.dataset_tables SET table_name = moved_name
     WHERE organization_id = r.organization_id AND table_name = r.table_name;
    UPDATE dataset_registry SET table_name = moved_name
     WHERE organization_id = r.organization_id AND table_name = r.table_name;
    moved := moved + 1;
  END LOOP;
  RETURN moved;
END $$;
