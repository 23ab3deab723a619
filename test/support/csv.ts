import { parse } from "csv-parse/sync";

export const BOM = "\uFEFF";

export interface CsvPage {
  header: string[];
  rows: Record<string, string>[];
  raw: string;
}

/** Parses a CSV page as the API sends it (BOM, header row, LF records), failing on dialect violations. */
export function parseCsvPage(body: Buffer): CsvPage {
  const raw = body.toString("utf8");
  if (!raw.startsWith(BOM)) throw new Error("CSV body does not start with the UTF-8 byte-order mark");
  const text = raw.slice(BOM.length);
  const records: string[][] = parse(text, { relax_quotes: false, relax_column_count: false, max_record_size: 16 * 1024 * 1024 });
  if (records.length === 0) throw new Error("CSV body has no header row");
  const [header, ...data] = records;
  return { header, rows: data.map((r) => Object.fromEntries(header.map((h, i) => [h, r[i]]))), raw: text };
}

/** Text forms of each dataType (docs/contract.md §5); an empty cell is always allowed (NULL). */
export const VALUE_PATTERNS: Record<string, RegExp> = {
  uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/,
  number: /^-?\d+(\.\d+)?$/,
  boolean: /^[tf]$/,
  dateTime: /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?\+00$/,
  localDateTime: /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?$/,
  date: /^\d{4}-\d{2}-\d{2}$/,
};

/** Checks a value against its column's dataType; returns a message when it does not fit. */
export function valueProblem(dataType: string, value: string): string | undefined {
  if (value === "") return undefined;
  const pattern = VALUE_PATTERNS[dataType];
  if (!pattern) return undefined;
  if (!pattern.test(value)) return `'${value.slice(0, 80)}' is not a ${dataType}`;
  if (dataType === "number" && /\.\d*0$/.test(value)) return `'${value}' has trailing zeros`;
  if ((dataType === "dateTime" || dataType === "localDateTime") && /\.\d*0(\+00)?$/.test(value)) return `'${value}' has trailing fraction zeros`;
  return undefined;
}
