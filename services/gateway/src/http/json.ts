import { promisify } from "node:util";
import { gzip } from "node:zlib";
import type { Context } from "koa";

const gzipAsync = promisify(gzip);

/** Bodies below this size gain nothing from gzip (framing overhead beats the saving). */
const GZIP_MIN_BYTES = 1024;

/** Sends a JSON body, gzipped when the client accepts it and it is worth it. */
export async function sendJson(ctx: Context, value: unknown, gzipLevel: number): Promise<void> {
  const json = Buffer.from(JSON.stringify(value), "utf8");
  ctx.vary("Accept-Encoding");
  ctx.type = "application/json; charset=utf-8";
  if (json.length >= GZIP_MIN_BYTES && ctx.acceptsEncodings("gzip", "identity") === "gzip") {
    ctx.set("Content-Encoding", "gzip");
    ctx.body = await gzipAsync(json, { level: gzipLevel });
    return;
  }
  ctx.body = json;
}
