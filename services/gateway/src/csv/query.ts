import { Errors, isUuid, quoteInput } from "@exportsvc/common";
import type { ExportCsvRequest } from "@exportsvc/proto";
import { parametersWithInvalidText } from "../http/text-input";
import { parseInstantMicros } from "./timestamp";

/** The CSV endpoint's query, parsed to the types of ExportCsvRequest (range rules are the export service's). */
export type CsvQuery = Omit<ExportCsvRequest, "$typeName" | "$unknown" | "organizationId" | "datasetKey">;

type RawQuery = Record<string, string | string[] | undefined>;

const INTEGER = /^-?\d+$/;
const INT32 = { min: -(2n ** 31n), max: 2n ** 31n - 1n };
const INT64 = { min: -(2n ** 63n), max: 2n ** 63n - 1n };

const INVALID_TEXT_MESSAGE = "is not valid text (a NUL character, a malformed percent-escape or bytes that are not UTF-8)";
const INSTANT_MESSAGE =
  "must be a date-time with an offset, e.g. 2024-05-01 12:30:00.123456+00 (URL-encode '+' as %2B) or 2024-05-01T12:30:00Z";

/**
 * Parses every known parameter and reports every unparsable one at once (400 INVALID_PARAMETER),
 * before anything looks at the dataset. Unknown parameters are ignored, unless their name or value
 * is not valid text (NUL, not UTF-8), which no parameter may be; `cursor` passes through raw, empty
 * included, for the export service to judge. `rawQuerystring` is the query as sent (still encoded).
 */
export function parseCsvQuery(raw: RawQuery, rawQuerystring = ""): CsvQuery {
  const errors: Record<string, string[]> = {};
  const fail = (name: string, message: string) => (errors[name] ??= []).push(message);
  const invalidText = new Set(parametersWithInvalidText(rawQuerystring));
  for (const name of invalidText) fail(name, INVALID_TEXT_MESSAGE);
  const single = (name: string): string | undefined => {
    if (invalidText.has(name)) return undefined;
    const value = raw[name];
    if (Array.isArray(value)) {
      fail(name, "must be given at most once");
      return undefined;
    }
    return value;
  };
  const integer = (name: string, range: { min: bigint; max: bigint }, label: string): bigint | undefined => {
    const text = single(name);
    if (text === undefined) return undefined;
    if (!INTEGER.test(text)) return void fail(name, "must be an integer");
    const value = BigInt(text);
    if (value < range.min || value > range.max) return void fail(name, `must be a ${label} integer`);
    return value;
  };
  const instant = (name: string): bigint | undefined => {
    const text = single(name);
    if (text === undefined) return undefined;
    const micros = parseInstantMicros(text);
    if (micros === undefined) fail(name, INSTANT_MESSAGE);
    return micros;
  };

  const query: CsvQuery = {};
  const cursor = single("cursor");
  if (cursor !== undefined) query.cursor = cursor;
  const modifiedSince = instant("modifiedSince");
  if (modifiedSince !== undefined) query.modifiedSinceMicros = modifiedSince;
  const after = single("after");
  if (after !== undefined) {
    if (isUuid(after)) query.after = after.toLowerCase();
    else fail("after", "must be a UUID, e.g. 0b6f2c5e-8d4a-4f7e-9c1b-2a3d4e5f6a7b");
  }
  const afterRowIndex = integer("afterRowIndex", INT64, "64-bit");
  if (afterRowIndex !== undefined) query.afterRowIndex = afterRowIndex;
  const limit = integer("limit", INT32, "32-bit");
  if (limit !== undefined) query.limit = Number(limit);
  const from = instant("from");
  if (from !== undefined) query.fromMicros = from;
  const to = instant("to");
  if (to !== undefined) query.toMicros = to;

  const faulty = Object.keys(errors);
  if (faulty.length > 0) {
    // Names come from the caller (an unknown one with invalid text too): quoted, never raw.
    const detail = faulty.map((name) => `${quoteInput(name)} ${errors[name].join(" and ")}`).join("; ");
    throw Errors.invalidParameter(errors, `Unparsable query parameter${faulty.length > 1 ? "s" : ""}: ${detail}.`);
  }
  return query;
}
