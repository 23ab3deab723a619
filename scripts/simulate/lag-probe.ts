import { Client } from "pg";

/**
 * Sync lag of a consumer that records none itself (the reference client): the simulator owns the
 * copy database, so an event trigger attaches a row trigger to every table the consumer creates in
 * `public`, and each row version that arrives (an insert, or an update that moves `last_modified`)
 * is written to `sim_lag` with the time it was written. Re-reads that change nothing (a full read
 * upserting the same version) are not counted; `sim_tables` keeps when each table appeared, so a
 * first read of a dataset key (rows changed before the consumer followed it, e.g. a renamed form's
 * new key) is left out of the lag, as for the stand-in consumer.
 */
export const LAG_TABLE = "sim_lag";
export const TABLES_TABLE = "sim_tables";

export async function installLagProbe(databaseUrl: string): Promise<void> {
  const db = new Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    await db.query(`
      CREATE TABLE IF NOT EXISTS ${LAG_TABLE} (dataset text NOT NULL, last_modified timestamptz NOT NULL, synced_at timestamptz NOT NULL DEFAULT clock_timestamp());
      CREATE TABLE IF NOT EXISTS ${TABLES_TABLE} (name text PRIMARY KEY, created_at timestamptz NOT NULL DEFAULT clock_timestamp());
      CREATE OR REPLACE FUNCTION sim_record_lag() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        lm text := to_jsonb(NEW) ->> 'last_modified';
      BEGIN
        IF lm IS NULL THEN RETURN NULL; END IF;
        IF TG_OP = 'UPDATE' AND (to_jsonb(OLD) ->> 'last_modified') IS NOT DISTINCT FROM lm THEN RETURN NULL; END IF;
        INSERT INTO ${LAG_TABLE} (dataset, last_modified) VALUES (TG_TABLE_NAME, lm::timestamptz);
        RETURN NULL;
      END $$;
      CREATE OR REPLACE FUNCTION sim_attach_lag() RETURNS event_trigger LANGUAGE plpgsql AS $$
      DECLARE
        obj record;
      BEGIN
        FOR obj IN SELECT * FROM pg_event_trigger_ddl_commands() WHERE object_type = 'table' AND schema_name = 'public' LOOP
          IF obj.object_identity IN ('public.${LAG_TABLE}', 'public.${TABLES_TABLE}') THEN CONTINUE; END IF;
          EXECUTE format('CREATE TRIGGER sim_lag AFTER INSERT OR UPDATE ON %s FOR EACH ROW EXECUTE FUNCTION sim_record_lag()', obj.object_identity);
          INSERT INTO ${TABLES_TABLE} (name) VALUES (split_part(obj.object_identity, '.', 2)) ON CONFLICT DO NOTHING;
        END LOOP;
      END $$;
      DROP EVENT TRIGGER IF EXISTS sim_attach_lag;
      CREATE EVENT TRIGGER sim_attach_lag ON ddl_command_end WHEN TAG IN ('CREATE TABLE') EXECUTE FUNCTION sim_attach_lag();`);
  } finally {
    await db.end();
  }
}

/** The lag rows of a copy with the probe, in the shape the verdict reads (ms). */
export const LAG_PROBE_SQL = `
  SELECT l.dataset, extract(epoch FROM l.synced_at - l.last_modified) * 1000 AS lag_ms, extract(epoch FROM l.synced_at) * 1000 AS t
    FROM ${LAG_TABLE} l JOIN ${TABLES_TABLE} s ON s.name = l.dataset
   WHERE l.last_modified >= $1 AND l.last_modified >= s.created_at
   ORDER BY l.synced_at`;
