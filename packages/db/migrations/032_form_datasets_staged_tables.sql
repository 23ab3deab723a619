-- A rebuild may render some of a form's tables on helper connections (docs/form-datasets.md,
-- "Parallel rebuild"): each helper commits its table before the rebuild's own transaction swaps the
-- registry, so until that swap the table is "staged". A staged table whose rebuild ended without
-- adopting it (rolled back, crashed) is dropped by the cleanup pass once the form's lock is free.
ALTER TABLE form_ds.dataset_tables ADD COLUMN staged boolean NOT NULL DEFAULT false;
CREATE INDEX dataset_tables_staged ON form_ds.dataset_tables (created_at) WHERE staged;
