import { dropDatabase } from "@exportsvc/db";

export default async function globalTeardown(): Promise<void> {
  const info = (globalThis as any).__TEST_DB__ as { adminUrl: string; dbName: string } | undefined;
  if (info) await dropDatabase(info.adminUrl, info.dbName).catch(() => undefined);
  const embedded = (globalThis as any).__EMBEDDED_PG__;
  if (embedded) await embedded.stop();
}
