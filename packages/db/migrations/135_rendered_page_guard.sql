-- The guard of a page read from a rendered table (docs/export.md, "Rendered datasets"). The export
-- service plans such a page from the dataset's rendered_datasets row read just before (current: the
-- table's walk; patchable: the table patched with live rows) and COPYs one statement whose WHERE
-- calls this function once, before its first row, with that plan's conditions evaluated in the
-- statement's own snapshot. Should a render or a write have committed in between so that the plan
-- no longer holds, the statement fails with SQLSTATE XR001 and no row, and the page is planned again;
-- it never serves a table behind its rows. STABLE and argument-only: PostgreSQL evaluates it as a
-- one-time filter (once per statement), not per row.
CREATE FUNCTION rendered_page_guard(plan_holds boolean) RETURNS boolean LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
  IF plan_holds IS NOT TRUE THEN
    RAISE EXCEPTION 'the rendered dataset''s state changed since the page was planned' USING ERRCODE = 'XR001';
  END IF;
  RETURN true;
END $$;
