-- Replaced form dataset tables are dropped after a grace period rather than at the swap: an export
-- that read the registry just before the swap still finds the table it was pointed at.
ALTER TABLE form_ds.dataset_tables ADD COLUMN retired_at timestamptz;
CREATE INDEX dataset_tables_retired ON form_ds.dataset_tables (retired_at) WHERE retired_at IS NOT NULL;
