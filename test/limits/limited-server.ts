/**
 * A stand-in gateway replica for the multi-process limits test: admits each request through the
 * real rate limiter against the shared Redis, holds it for `ms` and then releases its slot.
 *
 *   GET /hold?org=<id>&ms=<n>  → 200 once admitted (headers flushed at once, body after n ms)
 *                               → 429 with the limiter's headers when a limit is hit
 *
 * An independent counter in Redis (INCR after admission, DECR before release) tells the test how
 * many requests of the organization were being held across all processes at that moment.
 * Prints "LISTENING <port>" when ready.
 */
import { createServer } from "node:http";
import { createClient } from "redis";
import { isAppError, parseConfig } from "@exportsvc/common";
import { createRateLimiter, limitsConfigSchema, rateLimiterOptionsFromConfig } from "../../services/gateway/src/limits";
import { createSharedStore } from "../../services/gateway/src/store";

async function main() {
  const redisUrl = process.env.REDIS_URL;
  if (!redisUrl) throw new Error("REDIS_URL is required");
  const keyPrefix = process.env.KEY_PREFIX ?? "limits-test:";
  const store = createSharedStore({ redisUrl });
  if (!(await store.ready(5000))) throw new Error("Redis did not answer");
  const limiter = createRateLimiter(store, { ...rateLimiterOptionsFromConfig(parseConfig(limitsConfigSchema)), keyPrefix });
  const probe = createClient({ url: redisUrl });
  await probe.connect();

  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    const org = url.searchParams.get("org") ?? "none";
    const holdMs = Number(url.searchParams.get("ms") ?? "0");
    let admission;
    try {
      admission = await limiter.admit(org);
    } catch (err) {
      if (isAppError(err) && err.status === 429) {
        res.writeHead(429, { ...err.headers, "Retry-After": String(err.retryAfter), "Content-Type": "application/json" });
        res.end(JSON.stringify({ errorCode: err.errorCode, detail: err.detail }));
        return;
      }
      res.writeHead(500).end(String(err));
      return;
    }
    const counter = `${keyPrefix}probe:{${org}}:held`;
    const held = await probe.incr(counter);
    res.writeHead(200, { "X-Held": String(held), "Content-Type": "application/json" });
    res.flushHeaders();
    await new Promise((r) => setTimeout(r, holdMs));
    await probe.decr(counter);
    admission.release();
    res.end(JSON.stringify({ held }));
  });
  server.listen(0, "127.0.0.1", () => {
    const address = server.address();
    process.stdout.write(`LISTENING ${typeof address === "object" && address ? address.port : 0}\n`);
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
