import type { PoolClient } from "pg";
import type { DeletableSection } from "./schema";
import { TABLE_OF } from "./tables";
import { deleteRows } from "./upsert";

/** Join rows owned by a deleted record go with it; rows of others that point at it stay (dangling ids). */
const OWNED_WITHOUT_FOREIGN_KEY: Partial<Record<DeletableSection, [string, string][]>> = {
  suppliers: [["supplier_products", "supplier_id"]],
  customers: [["customer_products", "customer_id"]],
};

export async function deleteSection(client: PoolClient, org: string, section: DeletableSection, ids: string[]): Promise<number> {
  for (const [table, column] of OWNED_WITHOUT_FOREIGN_KEY[section] ?? []) {
    await client.query(`DELETE FROM ${table} WHERE organization_id = $1 AND ${column} = ANY($2::uuid[])`, [org, ids]);
  }
  return deleteRows(client, org, TABLE_OF[section], ids);
}
