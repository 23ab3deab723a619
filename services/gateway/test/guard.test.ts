/**
 * The guard's memory of refusals (http/access-control.ts): what lets a route start work before
 * admission without a refused organization's flood reaching the database.
 */
import type { Context } from "koa";
import { Errors } from "@exportsvc/common";
import { createGuard } from "../src/http/access-control";
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
  return { guard, refusals, request, advance: (ms: number) => (now += ms) };
}

it("remembers a 429 for its Retry-After, per organization", async () => {
  const { guard, refusals, request, advance } = setup();
  expect(guard.recentlyRefused(ORG)).toBe(false);
  refusals.set(ORG, Errors.rateLimited({ limit: 600, retryAfter: 7, reset: 7, detail: "over" }));
  await expect(request(ORG)).rejects.toMatchObject({ status: 429 });
  expect(guard.recentlyRefused(ORG)).toBe(true);
  expect(guard.recentlyRefused(OTHER)).toBe(false);
  advance(6_999);
  expect(guard.recentlyRefused(ORG)).toBe(true);
  advance(1);
  expect(guard.recentlyRefused(ORG)).toBe(false);
});

it("forgets nothing on an admission, and remembers only 429s", async () => {
  const { guard, refusals, request } = setup();
  await expect(request(ORG)).resolves.toBeUndefined();
  expect(guard.recentlyRefused(ORG)).toBe(false);
  refusals.set(ORG, Errors.databaseUnavailable());
  await expect(request(ORG)).rejects.toMatchObject({ status: 503 });
  expect(guard.recentlyRefused(ORG)).toBe(false);
});
