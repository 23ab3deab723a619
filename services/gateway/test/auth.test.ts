import { generateApiKey, hashApiKeySecret } from "@exportsvc/common";
import { authConfigSchema, authenticatorTimingsFromConfig, bearerSecret, createAuthenticator, type Queryable } from "../src/auth";
import { createMemoryStore, type SharedStore } from "../src/store";
import { appErrorOf } from "./support/app-error";
import type { KeyRow } from "@exportsvc/db";

const PEPPER = "unit-test-pepper";
const ORG = "5d0c3a3e-1111-4a4a-9c9c-000000000001";

type FakeKey = KeyRow;

/** A key store answering the authenticator's one query from memory, counting round trips. */
function fakeKeyStore() {
  const keys = new Map<string, FakeKey>();
  let unreachable = false;
  const db: Queryable & { queries: number } = {
    queries: 0,
    async query<R>(_text: string, values?: unknown[]) {
      db.queries++;
      if (unreachable) throw Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });
      const row = keys.get(String(values?.[0]));
      return { rows: (row ? [{ ...row }] : []) as R[] };
    },
  };
  const issue = (overrides: Partial<FakeKey> = {}) => {
    const key = generateApiKey();
    keys.set(hashApiKeySecret(key.secret, PEPPER), {
      id: key.id,
      organization_id: ORG,
      secret_hash: hashApiKeySecret(key.secret, PEPPER),
      expires_at: null,
      revoked_at: null,
      organization_known: true,
      export_enabled: true,
      ...overrides,
    });
    return { ...key, header: `Bearer ${key.secret}`, row: () => keys.get(hashApiKeySecret(key.secret, PEPPER))! };
  };
  return { db, issue, setUnreachable: (v: boolean) => void (unreachable = v) };
}

function manualClock(start = Date.parse("2026-01-01T00:00:00Z")) {
  let now = start;
  return { now: () => now, advance: (ms: number) => void (now += ms) };
}

function setup(options: { store?: SharedStore } = {}) {
  const clock = manualClock();
  const keyStore = fakeKeyStore();
  const store = options.store ?? createMemoryStore({ clock });
  const auth = createAuthenticator({ store, db: keyStore.db, keyHashSecret: PEPPER, clock, successTtlSeconds: 60, rejectionTtlSeconds: 30 });
  return { clock, keyStore, store, auth };
}


describe("bearer token syntax", () => {
  const { secret, id } = generateApiKey();

  it("accepts Bearer with a well-formed secret, the scheme in any case", () => {
    expect(bearerSecret(`Bearer ${secret}`)).toBe(secret);
    expect(bearerSecret(`bearer ${secret}`)).toBe(secret);
    expect(bearerSecret(`BEARER  ${secret} `)).toBe(secret);
  });

  it.each([
    ["missing", undefined],
    ["empty", ""],
    ["another scheme", `Basic ${secret}`],
    ["no token", "Bearer"],
    ["the secret without scheme", secret],
    ["the key id instead of the secret", `Bearer ${id}`],
    ["a token not starting ak_", `Bearer xk_${secret.slice(3)}`],
    ["a character outside base62", `Bearer ${secret.slice(0, -1)}-`],
    ["a secret one character short", `Bearer ${secret.slice(0, -1)}`],
    ["a secret one character long", `Bearer ${secret}A`],
    ["two tokens", `Bearer ${secret} ${secret}`],
  ])("rejects %s", (_name, header) => {
    expect(bearerSecret(header)).toBeUndefined();
  });
});

describe("authenticator (in-process store, fake key store, manual clock)", () => {
  it("answers a malformed header with 401 without asking the key store", async () => {
    const { auth, keyStore } = setup();
    const err = await appErrorOf(auth.authenticate("Bearer ak_123"));
    expect(err).toMatchObject({ status: 401, errorCode: "UNAUTHORIZED", detail: undefined });
    expect(keyStore.db.queries).toBe(0);
  });

  it("accepts a current key and caches the success for 60 seconds", async () => {
    const { auth, keyStore, clock } = setup();
    const key = keyStore.issue();
    await expect(auth.authenticate(key.header)).resolves.toEqual({ organizationId: ORG, keyId: key.id });
    clock.advance(59_999);
    await expect(auth.authenticate(key.header)).resolves.toEqual({ organizationId: ORG, keyId: key.id });
    expect(keyStore.db.queries).toBe(1);
    clock.advance(1);
    await auth.authenticate(key.header);
    expect(keyStore.db.queries).toBe(2);
  });

  it("lets a revocation take effect when the cached success runs out", async () => {
    const { auth, keyStore, clock } = setup();
    const key = keyStore.issue();
    await auth.authenticate(key.header);
    key.row().revoked_at = new Date(clock.now());
    clock.advance(30_000);
    await expect(auth.authenticate(key.header)).resolves.toMatchObject({ keyId: key.id });
    clock.advance(30_000);
    expect(await appErrorOf(auth.authenticate(key.header))).toMatchObject({ status: 401 });
  });

  it("enforces an expiry at its exact instant even from the cache", async () => {
    const { auth, keyStore, clock } = setup();
    const key = keyStore.issue({ expires_at: new Date(clock.now() + 10_000) });
    await auth.authenticate(key.header);
    clock.advance(9_999);
    await expect(auth.authenticate(key.header)).resolves.toMatchObject({ keyId: key.id });
    clock.advance(1);
    expect(await appErrorOf(auth.authenticate(key.header))).toMatchObject({ status: 401 });
    expect(keyStore.db.queries).toBe(1);
  });

  it("treats a revocation scheduled ahead like an expiry", async () => {
    const { auth, keyStore, clock } = setup();
    const key = keyStore.issue({ revoked_at: new Date(clock.now() + 5_000) });
    await auth.authenticate(key.header);
    clock.advance(5_000);
    expect(await appErrorOf(auth.authenticate(key.header))).toMatchObject({ status: 401 });
  });

  it("remembers a rejection per secret for the rejection time, while another key works at once", async () => {
    const { auth, keyStore, clock } = setup();
    const unknown = generateApiKey();
    expect(await appErrorOf(auth.authenticate(`Bearer ${unknown.secret}`))).toMatchObject({ status: 401 });
    expect(keyStore.db.queries).toBe(1);
    const other = keyStore.issue();
    await expect(auth.authenticate(other.header)).resolves.toMatchObject({ keyId: other.id });
    expect(keyStore.db.queries).toBe(2);
    clock.advance(29_999);
    expect(await appErrorOf(auth.authenticate(`Bearer ${unknown.secret}`))).toMatchObject({ status: 401 });
    expect(keyStore.db.queries).toBe(2);
    clock.advance(1);
    expect(await appErrorOf(auth.authenticate(`Bearer ${unknown.secret}`))).toMatchObject({ status: 401 });
    expect(keyStore.db.queries).toBe(3);
  });

  it("rejects revoked, expired and unknown-organization keys with 401", async () => {
    const { auth, keyStore, clock } = setup();
    const revoked = keyStore.issue({ revoked_at: new Date(clock.now() - 1) });
    const expired = keyStore.issue({ expires_at: new Date(clock.now()) });
    const orphan = keyStore.issue({ organization_known: false, export_enabled: false });
    for (const key of [revoked, expired, orphan]) {
      expect(await appErrorOf(auth.authenticate(key.header))).toMatchObject({ status: 401, errorCode: "UNAUTHORIZED" });
    }
  });

  it("answers a key of an organization not enabled for export with 404", async () => {
    const { auth, keyStore } = setup();
    const key = keyStore.issue({ export_enabled: false });
    expect(await appErrorOf(auth.authenticate(key.header))).toMatchObject({ status: 404, errorCode: "ORGANIZATION_NOT_CONFIGURED" });
    expect(await appErrorOf(auth.authenticate(key.header))).toMatchObject({ status: 404 });
    expect(keyStore.db.queries).toBe(1);
  });

  it("answers 503 AUTH_UNAVAILABLE with Retry-After while the key store is unreachable, caches nothing then, and keeps cached keys working", async () => {
    const { auth, keyStore } = setup();
    const cached = keyStore.issue();
    await auth.authenticate(cached.header);
    const fresh = keyStore.issue();
    keyStore.setUnreachable(true);
    expect(await appErrorOf(auth.authenticate(fresh.header))).toMatchObject({ status: 503, errorCode: "AUTH_UNAVAILABLE", retryAfter: 5 });
    await expect(auth.authenticate(cached.header)).resolves.toMatchObject({ keyId: cached.id });
    keyStore.setUnreachable(false);
    await expect(auth.authenticate(fresh.header)).resolves.toMatchObject({ keyId: fresh.id });
  });

  it("shares one key store round trip among concurrent first requests with the same key", async () => {
    const { auth, keyStore } = setup();
    const key = keyStore.issue();
    const principals = await Promise.all(Array.from({ length: 8 }, () => auth.authenticate(key.header)));
    expect(principals.every((p) => p.keyId === key.id)).toBe(true);
    expect(keyStore.db.queries).toBe(1);
  });

  it("shares verdicts between replicas through the store, keyed by the hash, never holding the secret", async () => {
    const clock = manualClock();
    const written: string[] = [];
    const inner = createMemoryStore({ clock });
    const recording: SharedStore = {
      ...inner,
      set: async (key, value, ttl) => {
        written.push(key, value);
        return inner.set(key, value, ttl);
      },
    };
    const keyStore = fakeKeyStore();
    const replica = () => createAuthenticator({ store: recording, db: keyStore.db, keyHashSecret: PEPPER, clock });
    const key = keyStore.issue();
    await replica().authenticate(key.header);
    await replica().authenticate(key.header);
    expect(keyStore.db.queries).toBe(1);
    expect(written.length).toBeGreaterThan(0);
    expect(written.some((s) => s.includes(key.secret) || s.includes(key.secret.slice(3)))).toBe(false);
    expect(written[0]).toContain(hashApiKeySecret(key.secret, PEPPER));
  });
});

describe("verdicts kept in the replica's memory", () => {
  /** A memory store that counts the authenticator's reads of verdicts. */
  function countingStore(clock: { now(): number }) {
    const inner = createMemoryStore({ clock });
    const counted = { reads: 0 };
    const store: SharedStore = {
      ...inner,
      get: async (key) => {
        counted.reads++;
        return inner.get(key);
      },
    };
    return { store, counted };
  }

  it("answers a repeat request without the shared store until the shared entry would expire", async () => {
    const clock = manualClock();
    const { store, counted } = countingStore(clock);
    const keyStore = fakeKeyStore();
    const auth = createAuthenticator({ store, db: keyStore.db, keyHashSecret: PEPPER, clock, successTtlSeconds: 60 });
    const key = keyStore.issue();
    await auth.authenticate(key.header);
    const readsAfterFirst = counted.reads;
    clock.advance(59_999);
    await auth.authenticate(key.header);
    expect(counted.reads).toBe(readsAfterFirst);
    expect(keyStore.db.queries).toBe(1);
    clock.advance(1);
    await auth.authenticate(key.header);
    expect(counted.reads).toBe(readsAfterFirst + 1);
    expect(keyStore.db.queries).toBe(2);
  });

  it("counts each check as a cached success, a cached rejection or a key store look-up", async () => {
    const clock = manualClock();
    const keyStore = fakeKeyStore();
    const lookups: string[] = [];
    const auth = createAuthenticator({
      store: createMemoryStore({ clock }),
      db: keyStore.db,
      keyHashSecret: PEPPER,
      clock,
      metrics: { recordAuthCacheLookup: (result) => void lookups.push(result) },
    });
    const key = keyStore.issue();
    const unknown = `Bearer ${generateApiKey().secret}`;
    await auth.authenticate(key.header);
    await auth.authenticate(key.header);
    await appErrorOf(auth.authenticate(unknown));
    await appErrorOf(auth.authenticate(unknown));
    expect(lookups).toEqual(["miss", "hit", "miss", "negative_hit"]);
  });

  it("keeps a verdict read from another replica only until that replica's entry expires, so a revocation still takes 60 s at most", async () => {
    const clock = manualClock();
    const { store } = countingStore(clock);
    const keyStore = fakeKeyStore();
    const replica = () => createAuthenticator({ store, db: keyStore.db, keyHashSecret: PEPPER, clock, successTtlSeconds: 60 });
    const key = keyStore.issue();
    await replica().authenticate(key.header);
    key.row().revoked_at = new Date(clock.now());
    clock.advance(50_000);
    const late = replica();
    // Reads the first replica's verdict (10 s left), and keeps it no longer than that.
    await expect(late.authenticate(key.header)).resolves.toMatchObject({ organizationId: ORG });
    clock.advance(9_999);
    await expect(late.authenticate(key.header)).resolves.toMatchObject({ organizationId: ORG });
    clock.advance(1);
    expect(await appErrorOf(late.authenticate(key.header))).toMatchObject({ status: 401 });
  });
});

describe("auth configuration", () => {
  it("defaults to 60 s success cache, 30 s rejection cache, Retry-After 5", () => {
    expect(authenticatorTimingsFromConfig(authConfigSchema.parse({}))).toEqual({ successTtlSeconds: 60, rejectionTtlSeconds: 30, unavailableRetryAfterSeconds: 5 });
    expect(authConfigSchema.safeParse({ AUTH_REJECTION_TTL_SECONDS: "soon" }).success).toBe(false);
  });
});
