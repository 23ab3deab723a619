/** One jest run covers unit, integration and end-to-end suites of every workspace. */
module.exports = {
  testEnvironment: "node",
  transform: { "^.+\\.ts$": ["@swc/jest", { jsc: { parser: { syntax: "typescript" }, target: "es2022" }, module: { type: "commonjs" } }] },
  testMatch: ["<rootDir>/packages/*/test/**/*.test.ts", "<rootDir>/services/*/test/**/*.test.ts", "<rootDir>/test/**/*.test.ts"],
  globalSetup: "<rootDir>/test/support/global-setup.ts",
  globalTeardown: "<rootDir>/test/support/global-teardown.ts",
  testTimeout: 60000,
  moduleFileExtensions: ["ts", "js", "json"],
};
