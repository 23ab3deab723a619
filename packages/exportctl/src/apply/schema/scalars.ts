/** The value types the apply document's records are built of (ids, days, instants, optional fields). */
import { z } from "zod";
import { UUID_REGEX } from "@exportsvc/common";

export const uuid = z
  .string()
  .regex(UUID_REGEX, "must be a uuid")
  .transform((v) => v.toLowerCase());

const DAY_PATTERN = /^\d{4}-\d{2}-\d{2}$/;
const INSTANT_PATTERN = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|z|[-+]\d{2}(:?\d{2})?)$/;

// A month 13 is an invalid Date (toISOString would throw); 02-30 rolls over to another day.
const isExistingDay = (v: string) => {
  const d = new Date(`${v}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === v;
};
const isParsableInstant = (v: string) => !Number.isNaN(Date.parse(v.replace(" ", "T")));

/** A calendar day 'YYYY-MM-DD' that exists (the check of `day` and of date field values). */
export const isDay = (v: unknown): v is string => typeof v === "string" && DAY_PATTERN.test(v) && isExistingDay(v);
/** An ISO 8601 instant with an offset or Z (the check of `instant` and of dateTime field values). */
export const isInstant = (v: unknown): v is string => typeof v === "string" && INSTANT_PATTERN.test(v) && isParsableInstant(v);

/** A calendar day 'YYYY-MM-DD' that exists. */
export const day = z.string().regex(DAY_PATTERN, "must be a date YYYY-MM-DD").refine(isExistingDay, "is not a valid date");

/** An ISO 8601 instant with an offset or Z (microseconds allowed); PostgreSQL parses the text itself. */
export const instant = z
  .string()
  .regex(INSTANT_PATTERN, "must be an ISO 8601 instant with an offset, e.g. 2024-05-01T08:30:00Z")
  .refine(isParsableInstant, "is not a valid instant");

export const text = z.string().nullable().optional();
export const number = z.number().finite().nullable().optional();
export const ids = z.array(uuid).optional();
export const ref = uuid.nullable().optional();
export const lastModified = instant.optional();
/** Custom attribute values keyed by attribute key or id; values are stored as entered. */
export const attributes = z.record(z.string(), z.unknown()).optional();
