import { AppError, Errors, type Logger } from "@exportsvc/common";
import { handlerErrorMapping, unavailableMapping } from "../src";

function recordingLog() {
  const entries: { level: string; msg: string; err: unknown }[] = [];
  const record = (level: string) => (fields: { err: unknown }, msg: string) => void entries.push({ level, msg, err: fields.err });
  return { entries, log: { warn: record("warn"), error: record("error") } as unknown as Logger };
}

const unavailable = (err: unknown) => (err as { code?: string }).code === "ECONNREFUSED";

describe("handlerErrorMapping", () => {
  it("returns the body's result", async () => {
    const { log, entries } = recordingLog();
    await expect(handlerErrorMapping(log, unavailable)("Op", async () => 42)).resolves.toBe(42);
    expect(entries).toEqual([]);
  });

  it("lets AppErrors through unchanged and unlogged", async () => {
    const { log, entries } = recordingLog();
    const notFound = Errors.datasetNotFound("x");
    await expect(handlerErrorMapping(log, unavailable)("Op", async () => Promise.reject(notFound))).rejects.toBe(notFound);
    expect(entries).toEqual([]);
  });

  it("turns an unreachable database into the typed 503, with a warning", async () => {
    const { log, entries } = recordingLog();
    const cause = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
    const err = await handlerErrorMapping(log, unavailable)("SyncDatasets", async () => Promise.reject(cause)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ status: 503, errorCode: "DATABASE_UNAVAILABLE" });
    expect(entries).toEqual([{ level: "warn", msg: "SyncDatasets: database unavailable", err: cause }]);
  });

  it("turns anything else into a bare 500 and logs the cause", async () => {
    const { log, entries } = recordingLog();
    const cause = new Error("secret internals");
    const err = await handlerErrorMapping(log, unavailable)("ListDatasets", async () => Promise.reject(cause)).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 500, errorCode: "INTERNAL_ERROR" });
    expect((err as AppError).message).not.toContain("secret internals");
    expect(entries).toEqual([{ level: "error", msg: "ListDatasets failed", err: cause }]);
  });
});

describe("unavailableMapping", () => {
  it("turns an unreachable database into the typed 503 and passes everything else unchanged", async () => {
    const withDatabase = unavailableMapping(unavailable);
    await expect(withDatabase(async () => 42)).resolves.toBe(42);
    const refused = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
    await expect(withDatabase(async () => Promise.reject(refused))).rejects.toMatchObject({ status: 503, errorCode: "DATABASE_UNAVAILABLE" });
    const notFound = Errors.datasetNotFound("x");
    await expect(withDatabase(async () => Promise.reject(notFound))).rejects.toBe(notFound);
    const bug = new Error("bug");
    await expect(withDatabase(async () => Promise.reject(bug))).rejects.toBe(bug);
  });
});
