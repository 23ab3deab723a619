/**
 * Guard.beforeAdmission (http/access-control.ts): what lets a route start work before a request is
 * admitted without a refused or flooding organization reaching the database through it.
 */
import type { Context } from "koa";
import { Errors } from "@exportsvc/common";
import { createGuard, EARLY_WORK_PER_ORGANIZATION } from "../src/http/access-control";
import type { Admission, RateLimiter } from "../src/contracts";

const ORG = "11111111-1111-4111-8111-111111111111";
const OTHER = "22222222-2222-4222-8222-222222222222";

function setup() {
  let now = 1_000_000;
  const refusals = new Map<string, Error>();
  const limiter: RateLimiter = {
    async admit(organizationId): Promise<Admission> {
      const refusal = refusals.get(organizationId);
      if (refusal) throw refusal;
      return { release: () => undefined };
    },
  };
  const guard = createGuard({ authenticate: async () => ({ organizationId: ORG, keyId: "k" }) }, limiter, () => now);
  const request = (organizationId: string) => {
    const ctx = { state: { principal: { organizationId } }, res: { closed: false, once: () => undefined } } as unknown as Context;
    return guard.rateLimit(ctx, async () => undefined);
  };
  /** Whether the guard lets work start early for the organization (the work settles at once). */
  const startsEarly = (organizationId: string) => guard.beforeAdmission(organizationId, async () => "done") !== undefined;
  return { guard, refusals, request, startsEarly, advance: (ms: number) => (now += ms) };
}

it("starts nothing early for an organization refused within its 429's Retry-After, per organization", async () => {
  const { refusals, request, startsEarly, advance } = setup();
  expect(startsEarly(ORG)).toBe(true);
  refusals.set(ORG, Errors.rateLimited({ limit: 600, retryAfter: 7, reset: 7, detail: "over" }));
  await expect(request(ORG)).rejects.toMatchObject({ status: 429 });
  expect(startsEarly(ORG)).toBe(false);
  expect(startsEarly(OTHER)).toBe(true);
  advance(6_999);
  expect(startsEarly(ORG)).toBe(false);
  advance(1);
  expect(startsEarly(ORG)).toBe(true);
});

it("remembers only 429s", async () => {
  const { refusals, request, startsEarly } = setup();
  await expect(request(ORG)).resolves.toBeUndefined();
  expect(startsEarly(ORG)).toBe(true);
  refusals.set(ORG, Errors.databaseUnavailable());
  await expect(request(ORG)).rejects.toMatchObject({ status: 503 });
  expect(startsEarly(ORG)).toBe(true);
});

it("runs at most EARLY_WORK_PER_ORGANIZATION early works of an organization at once, and frees a place when one settles either way", async () => {
  const { guard } = setup();
  const finishers: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];
  const pending = () =>
    new Promise<void>((resolve, reject) => {
      finishers.push({ resolve, reject });
    });
  const started = Array.from({ length: EARLY_WORK_PER_ORGANIZATION }, () => guard.beforeAdmission(ORG, pending));
  expect(started.every((p) => p !== undefined)).toBe(true);
  const refusedWork = jest.fn(pending);
  expect(guard.beforeAdmission(ORG, refusedWork)).toBeUndefined();
  expect(refusedWork).not.toHaveBeenCalled();
  // Another organization is not held up by this one.
  expect(guard.beforeAdmission(OTHER, async () => undefined)).toBeDefined();

  // A failing work frees its place too; its rejection is the caller's to handle.
  finishers[0].reject(new Error("statement failed"));
  await expect(started[0]).rejects.toThrow("statement failed");
  const next = guard.beforeAdmission(ORG, pending);
  expect(next).toBeDefined();
  expect(guard.beforeAdmission(ORG, pending)).toBeUndefined();

  // So does one that throws before it returns a promise.
  finishers[1].resolve();
  await started[1];
  expect(() =>
    guard.beforeAdmission(ORG, () => {
      throw new Error("no statement");
    }),
  ).toThrow("no statement");
  expect(guard.beforeAdmission(ORG, pending)).toBeDefined();

  for (const f of finishers.slice(2)) f.resolve();
  await next;
  expect(guard.beforeAdmission(ORG, async () => undefined)).toBeDefined();
});
