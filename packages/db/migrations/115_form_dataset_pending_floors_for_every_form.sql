-- Issue 30: forms built before migration 090 have no pending floor until their next consumed change
-- or rebuild, so their pages and listings keep the exact probe of the change log (the slow path that
-- walks dead index entries). Every form without a floor gets one here, conservative and marked held,
-- so the schema service's maintenance loop raises it to the present (raiseHeldPendingFloors) as it
-- does for any held floor.
--
-- The floor must bound every change pending now or logged later (migration 090). SHARE on the change
-- log waits for every writer that has logged a change to finish, and keeps new changes out until this
-- migration commits; the statements below then see every logged change (READ COMMITTED: a snapshot
-- per statement). A change logged after the commit is a writer's that holds a transaction id now
-- (stamped at or after its xact_start) or takes one later (stamped later still). So the floor is the
-- least of the form's oldest pending stamp, the oldest open writer's xact_start and the present.
LOCK TABLE form_dataset_changes IN SHARE MODE;

WITH writers AS (
  SELECT min(a.xact_start) AS since FROM pg_stat_activity a
   WHERE a.datname = current_database() AND a.backend_xid IS NOT NULL AND a.pid <> pg_backend_pid()
)
INSERT INTO form_dataset_pending_floors (organization_id, form_id, pending_from, held)
SELECT f.organization_id, f.id,
       least(statement_timestamp(), (SELECT since FROM writers),
             (SELECT min(c.source_last_modified) FROM form_dataset_changes c
               WHERE c.organization_id = f.organization_id AND c.form_id = f.id AND c.kind = 'submission'
                 AND c.source_last_modified IS NOT NULL)),
       true
  FROM forms f
 WHERE NOT EXISTS (SELECT 1 FROM form_dataset_pending_floors fl WHERE fl.organization_id = f.organization_id AND fl.form_id = f.id)
ON CONFLICT (organization_id, form_id) DO NOTHING;
