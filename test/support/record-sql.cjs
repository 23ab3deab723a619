/**
 * Preloaded into the services of a test (NODE_OPTIONS="--require <this file>") to record every SQL
 * statement they send through pg: one JSON line per statement ({ app, text }) appended to
 * SQL_AUDIT_FILE. Test-only; the services know nothing of it.
 */
"use strict";
const fs = require("node:fs");
const file = process.env.SQL_AUDIT_FILE;
if (file) {
  const pg = require("pg");
  const original = pg.Client.prototype.query;
  pg.Client.prototype.query = function recordedQuery(config, ...rest) {
    let text;
    if (typeof config === "string") text = config;
    else if (config && typeof config.text === "string") text = config.text;
    // pg-copy-streams and cursors pass an object with a `text`; anything else is recorded by type.
    else if (config && typeof config === "object") text = config.text ?? `<${config.constructor?.name ?? "object"}>`;
    if (text !== undefined) {
      try {
        fs.appendFileSync(file, JSON.stringify({ app: process.env.OTEL_SERVICE_NAME || process.argv[process.argv.length - 1], text }) + "\n");
      } catch {
        // A recorder that cannot write must not change the service's behaviour; the test sees the gap.
      }
    }
    return original.call(this, config, ...rest);
  };
}
