import { main } from "../src/cli";

/** Usage errors end with exit code 64 (docs/sync-client.md), never commander's generic 1; help is 0. */
describe("dataset-sync command line", () => {
  let stderr: jest.SpyInstance;
  let stdout: jest.SpyInstance;
  beforeEach(() => {
    process.exitCode = undefined;
    stderr = jest.spyOn(process.stderr, "write").mockImplementation(() => true);
    stdout = jest.spyOn(process.stdout, "write").mockImplementation(() => true);
  });
  afterEach(() => {
    stderr.mockRestore();
    stdout.mockRestore();
    process.exitCode = undefined;
  });

  it.each([
    ["a misspelt command", ["synk"], /unknown command 'synk'[\s\S]*Did you mean sync\?/],
    ["an unknown option", ["sync", "--limt", "10"], /unknown option '--limt'/],
    ["an out-of-range limit", ["sync", "--limit", "9000"], /limit/],
  ])("%s exits 64 and says what was wrong", async (_what, args, message) => {
    await main(["node", "dataset-sync", ...args]);
    expect(process.exitCode).toBe(64);
    expect(stderr.mock.calls.map((c) => String(c[0])).join("")).toMatch(message);
  });

  it("--help exits 0", async () => {
    await main(["node", "dataset-sync", "--help"]);
    expect(process.exitCode ?? 0).toBe(0);
    expect(stdout.mock.calls.map((c) => String(c[0])).join("")).toContain("Usage: dataset-sync");
  });
});
