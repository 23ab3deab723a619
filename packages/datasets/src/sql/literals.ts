import { escapeIdentifier, escapeLiteral } from "pg";
import { isUuid } from "@exportsvc/common";

/**
 * COPY takes no bind parameters, so every value that enters an export query is validated against
 * its type here and then quoted with the driver's escaping. Nothing else builds literals.
 */

export class InvalidLiteralError extends Error {
  constructor(kind: string) {
    super(`not a valid ${kind}`);
    this.name = "InvalidLiteralError";
  }
}

export function uuidLiteral(value: string): string {
  if (!isUuid(value)) throw new InvalidLiteralError("uuid");
  return `${escapeLiteral(value.toLowerCase())}::uuid`;
}

export function integerLiteral(value: number | bigint): string {
  if (typeof value === "number" && !Number.isSafeInteger(value)) throw new InvalidLiteralError("integer");
  return BigInt(value).toString();
}

/** A text literal (dataset keys, JSON keys); escaped by the driver. */
export function textLiteral(value: string): string {
  return escapeLiteral(value);
}

/** A quoted identifier (materialized table and column names from the registry). */
export function identifier(name: string): string {
  return escapeIdentifier(name);
}

/** A qualified table name `schema.table` or `table`, each part quoted. */
export function tableIdentifier(name: string): string {
  const parts = name.split(".");
  if (parts.length > 2 || parts.some((p) => p === "")) throw new InvalidLiteralError("table name");
  return parts.map(escapeIdentifier).join(".");
}

/**
 * A timestamptz literal from microseconds since the Unix epoch, written exactly (no float
 * arithmetic): `YYYY-MM-DD HH:MM:SS.ffffff+00`.
 */
export function timestamptzLiteral(micros: bigint): string {
  if (typeof micros !== "bigint") throw new InvalidLiteralError("timestamp");
  const millis = micros / 1000n - (micros % 1000n < 0n ? 1n : 0n);
  const date = new Date(Number(millis));
  if (Number.isNaN(date.getTime())) throw new InvalidLiteralError("timestamp");
  const fraction = (((micros % 1_000_000n) + 1_000_000n) % 1_000_000n).toString().padStart(6, "0");
  const year = date.getUTCFullYear();
  if (year < 1 || year > 9999) throw new InvalidLiteralError("timestamp");
  const iso = date.toISOString(); // YYYY-MM-DDTHH:MM:SS.mmmZ
  return `${escapeLiteral(`${iso.slice(0, 10)} ${iso.slice(11, 19)}.${fraction}+00`)}::timestamptz`;
}
