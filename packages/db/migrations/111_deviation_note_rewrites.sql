-- A deviation's standalone comment can be added, changed or removed without its last_modified moving
-- (docs/contract.md §9: displayed columns such as the standalone comment "do not move it; full re-reads
-- are needed to see them"; exportctl apply writes it as a note column). Such an update rewrites a
-- deviations row that an incremental sync has already read, so it moves the deviations dataset's
-- rewrite counter (105) and the consumer knows a full re-read is due. Found by the simulation
-- (seed 31: a comment in the source, none in the synced copy, the same last_modified).
--
-- Only rows whose comment changed while their last_modified stayed count: an edit that restamps the
-- row reaches incremental consumers by itself. One comparison per updated row, no probe.
CREATE FUNCTION bump_deviation_note_rewrites() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM bump_dataset_rewrite_counter(ARRAY(
    SELECT DISTINCT n.organization_id
      FROM new_rows n JOIN old_rows o ON o.organization_id = n.organization_id AND o.id = n.id
     WHERE n.comment IS DISTINCT FROM o.comment AND n.last_modified = o.last_modified), 'deviations');
  RETURN NULL;
END $$;

CREATE TRIGGER deviations_note_rewrites AFTER UPDATE ON deviations REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION bump_deviation_note_rewrites();
