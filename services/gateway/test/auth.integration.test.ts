import { randomUUID } from "node:crypto";
import type { Pool } from "pg";
import { generateApiKey, hashApiKeySecret } from "@exportsvc/common";
import { createPool } from "@exportsvc/db";
import { createTestOrganization, testPool } from "../../../test/support/db";
import { createAuthenticator, type ManagedAuthenticator } from "../src/auth";
import { createSharedStore, type SharedStore } from "../src/store";
import { appErrorOf } from "./support/app-error";

/**
 * Every authentication outcome against the real key store (PostgreSQL) and the real shared cache
 * (Redis at REDIS_URL; without it, the in-process store, as the title says).
 */
const PEPPER = `it-pepper-${randomUUID()}`;
const redisUrl = process.env.REDIS_URL;
const cacheName = redisUrl ? `Redis at ${redisUrl}` : "in-process store (REDIS_URL unset)";


describe(`authentication against PostgreSQL with the verdict cache in ${cacheName}`, () => {
  let pool: Pool;
  let store: SharedStore;
  let enabledOrg: string;

  const issueKey = async (organizationId: string, fields: { expiresAt?: Date; revokedAt?: Date } = {}) => {
    const key = generateApiKey();
    await pool.query(
      "INSERT INTO api_keys (id, organization_id, secret_hash, description, expires_at, revoked_at) VALUES ($1, $2, $3, 'test', $4, $5)",
      [key.id, organizationId, hashApiKeySecret(key.secret, PEPPER), fields.expiresAt ?? null, fields.revokedAt ?? null],
    );
    return { ...key, header: `Bearer ${key.secret}` };
  };

  const opened: ManagedAuthenticator[] = [];
  const authenticator = (db: Pool = pool, keyPrefix = `it-${randomUUID()}:`) => {
    const created = createAuthenticator({ store, db, keyHashSecret: PEPPER, keyPrefix });
    opened.push(created);
    return created;
  };

  beforeAll(async () => {
    pool = testPool();
    store = createSharedStore({ redisUrl });
    if (!(await store.ready(5000))) throw new Error("the shared store did not become ready");
    enabledOrg = await createTestOrganization(pool);
  });
  afterAll(async () => {
    await Promise.all(opened.map((a) => a.close()));
    await store.close();
    await pool.end();
  });

  it("accepts a current key: the principal is the key's organization and id", async () => {
    const key = await issueKey(enabledOrg);
    await expect(authenticator().authenticate(key.header)).resolves.toEqual({ organizationId: enabledOrg, keyId: key.id });
  });

  it("accepts a key with a future expiry", async () => {
    const key = await issueKey(enabledOrg, { expiresAt: new Date(Date.now() + 3_600_000) });
    await expect(authenticator().authenticate(key.header)).resolves.toMatchObject({ keyId: key.id });
  });

  it.each([
    ["missing", () => undefined],
    ["malformed", () => "Bearer not-a-key"],
    ["the key id instead of the secret", (k: { id: string }) => `Bearer ${k.id}`],
    ["a well-formed secret that was never issued", () => `Bearer ${generateApiKey().secret}`],
  ])("answers 401 for a token %s", async (_name, header) => {
    const key = await issueKey(enabledOrg);
    const err = await appErrorOf(authenticator().authenticate(header(key)));
    expect(err).toMatchObject({ status: 401, errorCode: "UNAUTHORIZED" });
    expect(err.detail).toBeUndefined();
  });

  it("answers 401 for a revoked key", async () => {
    const key = await issueKey(enabledOrg, { revokedAt: new Date(Date.now() - 1000) });
    expect(await appErrorOf(authenticator().authenticate(key.header))).toMatchObject({ status: 401 });
  });

  it("answers 401 for an expired key", async () => {
    const key = await issueKey(enabledOrg, { expiresAt: new Date(Date.now() - 1000) });
    expect(await appErrorOf(authenticator().authenticate(key.header))).toMatchObject({ status: 401 });
  });

  it("answers 401 for a current key of an unknown organization", async () => {
    const key = await issueKey(randomUUID());
    expect(await appErrorOf(authenticator().authenticate(key.header))).toMatchObject({ status: 401, errorCode: "UNAUTHORIZED" });
  });

  it("answers 404 ORGANIZATION_NOT_CONFIGURED for an organization disabled for export", async () => {
    const disabled = await createTestOrganization(pool, { enabled: false });
    const key = await issueKey(disabled);
    expect(await appErrorOf(authenticator().authenticate(key.header))).toMatchObject({ status: 404, errorCode: "ORGANIZATION_NOT_CONFIGURED" });
  });

  it("answers 404 ORGANIZATION_NOT_CONFIGURED for a known organization without export settings", async () => {
    const bare = randomUUID();
    await pool.query("INSERT INTO organizations (id, name) VALUES ($1, 'no export row')", [bare]);
    const key = await issueKey(bare);
    expect(await appErrorOf(authenticator().authenticate(key.header))).toMatchObject({ status: 404, errorCode: "ORGANIZATION_NOT_CONFIGURED" });
  });

  it("answers 503 AUTH_UNAVAILABLE with Retry-After when the key store cannot be reached", async () => {
    const closedPort = createPool({ connectionString: "postgres://postgres@127.0.0.1:1/postgres", max: 1 });
    try {
      const key = await issueKey(enabledOrg);
      const err = await appErrorOf(authenticator(closedPort).authenticate(key.header));
      expect(err).toMatchObject({ status: 503, errorCode: "AUTH_UNAVAILABLE", retryAfter: 5 });
    } finally {
      await closedPort.end();
    }
  });

  it("serves a key checked by one replica to another from the shared cache, even while the second cannot reach the key store", async () => {
    const prefix = `it-${randomUUID()}:`;
    const closedPort = createPool({ connectionString: "postgres://postgres@127.0.0.1:1/postgres", max: 1 });
    try {
      const key = await issueKey(enabledOrg);
      const first = authenticator(pool, prefix);
      const second = authenticator(closedPort, prefix);
      await first.authenticate(key.header);
      await expect(second.authenticate(key.header)).resolves.toEqual({ organizationId: enabledOrg, keyId: key.id });
    } finally {
      await closedPort.end();
    }
  });
});
