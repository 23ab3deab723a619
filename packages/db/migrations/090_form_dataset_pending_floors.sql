-- Issue 15: a form dataset page's pending part of the visibility horizon in one primary-key probe.
-- min(source_last_modified) over the form's pending changes (migration 040's partial index) walks
-- every dead index entry that consumed changes leave at the low end of the form's range until a
-- VACUUM (an index-only scan never marks them dead): 1M rows after a bulk import cost ~100 ms a page.
--
-- A floor per form, raised by whoever consumes the form's changes (maintenance batches, rebuilds)
-- in the consuming transaction, and by the maintenance loop while it is held back
-- (packages/datasets visibility.ts, raisePendingFloors):
--   pending_from = max(previous, least(oldest pending stamp seen, session horizon read before that));
-- every change pending now or logged later has source_last_modified at or after it: a change the
-- consumer could not see yet belongs to a writer that was open when the session horizon was read
-- (its stamps are at or after its xact_start) or that took its transaction id later (stamped later).
-- Pages and listings use it where it exists and the exact probe where it does not.
CREATE TABLE form_dataset_pending_floors (
  organization_id uuid NOT NULL,
  form_id uuid NOT NULL,
  pending_from timestamptz NOT NULL,
  -- Something kept pending_from back when it was raised (a pending change, an open writer, rows of the
  -- form counted at or after it): the maintenance loop raises it again.
  held boolean NOT NULL,
  raised_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (organization_id, form_id)
);
CREATE INDEX form_dataset_pending_floors_held ON form_dataset_pending_floors (raised_at) WHERE held;
