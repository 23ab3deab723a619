import { CURSOR_COLUMN } from "./api/types";
import type { TablePlan, Target } from "./targets/target";

/**
 * The plan one page is written with, for a CSV page and a rewrite feed page alike. A header can
 * differ from the listing the plan was made from (a publish between the listing and the page): a
 * column the listing lacks is added, as the type the table already holds or else as text, so the
 * page's rows are written whole instead of failing or being dropped. Each column is then written as
 * the type the table holds (a column widened earlier stays wide). `columns`: the table's columns
 * after any change, for the dataset's state.
 */
export async function planForHeader(
  target: Target,
  listed: TablePlan,
  header: readonly string[],
  tableColumns: Record<string, string>,
): Promise<{ plan: TablePlan; columns: Record<string, string> }> {
  const wanted: TablePlan = { ...listed, columns: { ...listed.columns } };
  let added = false;
  for (const key of header) {
    if (key === CURSOR_COLUMN || key in wanted.columns) continue;
    wanted.columns[key] = tableColumns[key] ?? "text";
    added = true;
  }
  let columns = tableColumns;
  if (added || Object.keys(wanted.columns).some((k) => !(k in columns))) columns = await target.ensureTable(wanted, tableColumns);
  const plan: TablePlan = { ...wanted, columns: Object.fromEntries(Object.keys(wanted.columns).map((k) => [k, columns[k] ?? wanted.columns[k]])) };
  return { plan, columns };
}
