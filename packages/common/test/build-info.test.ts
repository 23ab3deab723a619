import { buildConfigSchema, buildIdentity, ConfigError, parseConfig } from "../src";

const identityOf = (source: Record<string, string>) => buildIdentity(parseConfig(buildConfigSchema, source));

describe("buildIdentity: the build every service reports, read from its configuration", () => {
  it("takes APP_VERSION before npm's version, and the image's stamps as given", () => {
    expect(identityOf({ APP_VERSION: "2.0.0", npm_package_version: "0.1.0", IMAGE_TAG: "t", GIT_COMMIT: "c", BUILD_DATE: "2026-11-22T00:00:00Z" })).toEqual({
      imageTag: "t",
      commit: "c",
      buildDate: "2026-11-22T00:00:00Z",
      version: "2.0.0",
    });
    expect(identityOf({ npm_package_version: "0.3.0" }).version).toBe("0.3.0");
  });

  it("says a build is not stamped: dev, unknown, the start-up time and 0.1.0", () => {
    const identity = identityOf({});
    expect(identity).toMatchObject({ imageTag: "dev", commit: "unknown", version: "0.1.0" });
    expect(Number.isNaN(Date.parse(identity.buildDate))).toBe(false);
  });

  it("rejects a BUILD_DATE that is not a date, naming it", () => {
    expect(() => identityOf({ BUILD_DATE: "yesterday" })).toThrow(ConfigError);
    expect(() => identityOf({ BUILD_DATE: "yesterday" })).toThrow(/BUILD_DATE/);
  });
});
