import { Client } from "pg";

export default async function globalTeardown(): Promise<void> {
  const info = (globalThis as any).__TEST_DB__ as { adminUrl: string; dbName: string } | undefined;
  if (info) {
    const admin = new Client({ connectionString: info.adminUrl });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${info.dbName} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
  }
  const embedded = (globalThis as any).__EMBEDDED_PG__;
  if (embedded) await embedded.stop();
}
