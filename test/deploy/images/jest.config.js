/**
 * Suites that need the built images and podman (`npm run images:test`); not part of `npm test`
 * (the root config matches *.test.ts only). No global setup: the stack's own migrations Job
 * migrates a database of the run (see podman-stack.ts).
 */
const root = require("../../../jest.config.js");

module.exports = {
  rootDir: "../../..",
  testEnvironment: "node",
  transform: root.transform,
  moduleFileExtensions: root.moduleFileExtensions,
  testMatch: ["<rootDir>/test/deploy/images/**/*.images.ts"],
  testTimeout: 120000,
  verbose: true,
};
