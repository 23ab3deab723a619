import { unescape as unescapeLeniently } from "node:querystring";

/**
 * Input PostgreSQL cannot store or compare — a NUL character, bytes that are not UTF-8 (lone
 * surrogates included: their UTF-8 form is invalid) — is refused at the gateway, before anything
 * reaches a service or the database. Node and koa decode percent-escapes leniently (invalid
 * sequences become U+FFFD or stay escaped), so the check works on the raw, still-encoded text.
 */

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * The text a raw URL component stands for, or undefined when it is not valid text: a malformed
 * percent-escape, bytes that are not UTF-8, or a NUL. `plusIsSpace` for query components.
 */
export function decodeComponentStrictly(raw: string, plusIsSpace = false): string | undefined {
  const bytes: number[] = [];
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c === 0x25 /* % */) {
      const hex = raw.slice(i + 1, i + 3);
      if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return undefined;
      bytes.push(parseInt(hex, 16));
      i += 2;
    } else if (c === 0x2b /* + */ && plusIsSpace) {
      bytes.push(0x20);
    } else if (c < 0x80) {
      bytes.push(c);
    } else {
      // A raw non-ASCII character in the target (Node reads the request line as latin1 bytes).
      if (c > 0xff) return undefined;
      bytes.push(c);
    }
  }
  let text: string;
  try {
    text = utf8.decode(Uint8Array.from(bytes));
  } catch {
    return undefined;
  }
  return text.includes("\u0000") ? undefined : text;
}

/**
 * Names of the query parameters whose name or value is not valid text, decoded as koa decodes them
 * (so they match the keys of ctx.query; an invalid name has U+FFFD or a NUL in it).
 */
export function parametersWithInvalidText(rawQuerystring: string): string[] {
  const faulty: string[] = [];
  for (const pair of rawQuerystring.split("&")) {
    if (pair === "") continue;
    const eq = pair.indexOf("=");
    const name = eq < 0 ? pair : pair.slice(0, eq);
    const value = eq < 0 ? "" : pair.slice(eq + 1);
    const decodedName = decodeComponentStrictly(name, true);
    if (decodedName === undefined || decodeComponentStrictly(value, true) === undefined) faulty.push(decodedName ?? unescapeLeniently(name.replace(/\+/g, " ")));
  }
  return faulty;
}
