import type { PoolClient } from "pg";

/**
 * One concern that keeps part of an organization's dataset registry current (fixed datasets; later
 * form datasets). Runs inside the organization's sync transaction, under its advisory lock; returns
 * how many registry rows it wrote. Must write nothing when nothing changed.
 */
export interface DatasetSyncer {
  name: string;
  sync(client: PoolClient, organizationId: string): Promise<number>;
}
