import { join } from "node:path";
import { createDatabase, createPool, migrate, startEmbeddedPostgres } from "@exportsvc/db";

/**
 * Gives the whole jest run one fresh, migrated database:
 * - DATABASE_URL set (CI, developer machines): a new database `exportsvc_test_<pid>` on that server;
 * - DATABASE_URL unset (a fresh machine with only Node): an embedded PostgreSQL under .data/test-pg.
 * The run's URL is published as TEST_DATABASE_URL; TEST_ADMIN_DATABASE_URL can create more databases.
 */
export default async function globalSetup(): Promise<void> {
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    const embedded = await startEmbeddedPostgres(join(__dirname, "..", "..", ".data", "test-pg"), 54329, "postgres");
    (globalThis as any).__EMBEDDED_PG__ = embedded;
    adminUrl = embedded.url;
  }
  const dbName = `exportsvc_test_${process.pid}_${Date.now().toString(36)}`;
  process.env.TEST_ADMIN_DATABASE_URL = adminUrl;
  process.env.TEST_DATABASE_URL = await createDatabase(adminUrl, dbName);
  (globalThis as any).__TEST_DB__ = { adminUrl, dbName };
  const pool = createPool({ connectionString: process.env.TEST_DATABASE_URL });
  await migrate(pool);
  await pool.end();
}
