-- The value conversions catch errors with an EXCEPTION block, which starts a subtransaction, and no
-- subtransaction can start while a query runs in parallel mode, in a worker or in the leader
-- ("cannot start subtransactions during a parallel operation"). Marked PARALLEL SAFE they broke any
-- export whose plan went parallel. PostgreSQL's rule for such functions is PARALLEL UNSAFE; export
-- pages are small keyset scans that gain nothing from parallelism anyway.
ALTER FUNCTION export_try_numeric(text) PARALLEL UNSAFE;
ALTER FUNCTION export_try_date(text) PARALLEL UNSAFE;
ALTER FUNCTION export_try_timestamptz(text) PARALLEL UNSAFE;
ALTER FUNCTION export_local_text(timestamptz, text) PARALLEL UNSAFE;
