import type { to as copyTo } from "pg-copy-streams";

/**
 * Resolves once PostgreSQL reported the end of the statement (CommandComplete, then ReadyForQuery).
 * The COPY stream ends at CopyDone, which can arrive in an earlier packet: rowCount is only known after.
 */
export function commandCompleted(stream: ReturnType<typeof copyTo>): Promise<void> {
  return new Promise((resolve) => {
    const target = stream as unknown as { handleReadyForQuery(connection: unknown): void };
    const original = target.handleReadyForQuery.bind(stream);
    target.handleReadyForQuery = (connection) => {
      original(connection);
      resolve();
    };
  });
}
