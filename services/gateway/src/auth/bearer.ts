import { SECRET_PATTERN } from "@exportsvc/common";

/**
 * The key secret carried by an Authorization header, or undefined when the header is missing or is
 * not `Bearer <secret>` with a well-formed secret (ak_ + 40 base62). The scheme name is
 * case-insensitive (RFC 7235). A key id (ak_ + 16) is not a secret and fails here like any typo.
 */
export function bearerSecret(authorizationHeader: string | undefined): string | undefined {
  if (!authorizationHeader) return undefined;
  const match = /^Bearer +(\S+)$/i.exec(authorizationHeader.trim());
  if (!match) return undefined;
  const token = match[1]!;
  return SECRET_PATTERN.test(token) ? token : undefined;
}
