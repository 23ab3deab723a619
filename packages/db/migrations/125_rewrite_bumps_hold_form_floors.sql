-- A rewrite (migration 120) moves the changeToken and settles_at of every submission dataset that
-- shows the changed record (a renamed site). A form dataset's token is settled only once settles_at
-- is below its form's pending floor (migration 090), and only the form's own consumers raised that
-- floor: a quiet form kept the floor of its last change, below the rename, so its datasets' tokens
-- stayed "held" for good. A client that synced while the rename's entry was still behind the
-- visibility horizon recorded that held token, every later listing matched it (304), and the rename
-- never reached the copy (the 30-minute soak: five rows kept a site's old name).
--
-- The bump now also marks those forms' floors held: the schema service raises held floors on every
-- round (raiseHeldPendingFloors), past the rename once it is visible, and the token settles (moves).
-- Only the flag is written here, never the floor itself: a floor is raised only by raisePendingFloors,
-- which knows what is pending.
CREATE OR REPLACE FUNCTION bump_rewritten_datasets(organizations uuid[], feeds text[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO dataset_changes AS c (organization_id, dataset, version, changed_at, settles_at)
    SELECT k.organization_id, k.key, 1, clock_timestamp(), clock_timestamp() FROM (
      SELECT DISTINCT r.organization_id, r.key FROM dataset_registry r
       WHERE r.organization_id = ANY (organizations) AND r.state <> 'retired'
         AND CASE r.kind WHEN 'resource' THEN r.source_ref = ANY (feeds)
                         WHEN 'deviations' THEN 'deviations' = ANY (feeds)
                         WHEN 'submission' THEN 'form' = ANY (feeds)
                         ELSE false END) k
    ON CONFLICT (organization_id, dataset) DO UPDATE SET version = c.version + 1, changed_at = excluded.changed_at,
      settles_at = greatest(c.settles_at, excluded.settles_at);
  IF 'form' = ANY (feeds) THEN
    UPDATE form_dataset_pending_floors fl SET held = true
      FROM dataset_registry r
     WHERE r.organization_id = ANY (organizations) AND r.kind = 'submission' AND r.state <> 'retired'
       AND fl.organization_id = r.organization_id AND fl.form_id::text = r.source_ref AND NOT fl.held;
  END IF;
END $$;
