/** RFC 9110 weak comparison of an If-None-Match header against the current ETag. */
export function ifNoneMatchHits(header: string, etag: string): boolean {
  const opaque = (tag: string) => tag.trim().replace(/^W\//, "");
  if (header.trim() === "*") return true;
  return header.split(",").some((candidate) => opaque(candidate) === opaque(etag));
}
