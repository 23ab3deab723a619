const { spawnSync } = require("node:child_process");

/**
 * One jest run covers unit, integration and end-to-end suites of every workspace.
 *
 * Suites that need a real Redis shared between processes (they cannot run against the in-process
 * store) use REDIS_URL, or start a throwaway redis-server. On a machine with neither (a fresh
 * machine with only Node) they are left out of the run, and the run says so on stderr.
 */
const REDIS_ONLY_SUITES = ["<rootDir>/test/limits/", "<rootDir>/services/gateway/test/store-outage.test.ts"];
const redisAvailable = Boolean(process.env.REDIS_URL) || !spawnSync("redis-server", ["--version"]).error;
if (!redisAvailable) {
  process.stderr.write(
    `\nNOTE: no Redis (REDIS_URL unset, redis-server not installed): not running ${REDIS_ONLY_SUITES.map((s) => s.replace("<rootDir>/", "")).join(", ")}\n\n`,
  );
}

module.exports = {
  testEnvironment: "node",
  transform: { "^.+\\.ts$": ["@swc/jest", { jsc: { parser: { syntax: "typescript" }, target: "es2022" }, module: { type: "commonjs" } }] },
  testMatch: ["<rootDir>/packages/*/test/**/*.test.ts", "<rootDir>/services/*/test/**/*.test.ts", "<rootDir>/test/**/*.test.ts"],
  testPathIgnorePatterns: ["/node_modules/", ...(redisAvailable ? [] : REDIS_ONLY_SUITES)],
  globalSetup: "<rootDir>/test/support/global-setup.ts",
  globalTeardown: "<rootDir>/test/support/global-teardown.ts",
  testTimeout: 60000,
  moduleFileExtensions: ["ts", "js", "json"],
};
