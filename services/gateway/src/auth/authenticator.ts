import { BoundedMap, Errors, hashApiKeySecret, hashesEqual, type Logger } from "@exportsvc/common";
import { isDatabaseUnavailable } from "@exportsvc/db";
import type { Authenticator, Principal } from "../contracts";
import { systemClock, withLocalFallback, type Clock, type SharedStore } from "../store";
import { bearerSecret } from "./bearer";
import { findKeyByHash, type KeyStoreQueryable as Queryable, type StoredKey } from "@exportsvc/db";
import type { GatewayMetrics } from "../metrics";

export interface AuthenticatorOptions {
  store: SharedStore;
  /** The key store: a pg Pool (or anything with the same query method). */
  db: Queryable;
  /** Pepper of the stored secret hashes (KEY_HASH_SECRET). */
  keyHashSecret: string;
  successTtlSeconds?: number;
  rejectionTtlSeconds?: number;
  /** Retry-After of the 503 sent while the key store does not answer. */
  unavailableRetryAfterSeconds?: number;
  clock?: Clock;
  keyPrefix?: string;
  logger?: Logger;
  /** auth_cache_lookups_total: each check answered by a cached success (hit), a cached rejection (negative_hit), or the key store (miss). */
  metrics?: Pick<GatewayMetrics, "recordAuthCacheLookup">;
}

export interface ManagedAuthenticator extends Authenticator {
  close(): Promise<void>;
}

/** The outcome of checking one secret, as cached (by the secret's hash) in the shared store. */
type Verdict =
  | { outcome: "accepted"; organizationId: string; keyId: string; validUntil: number | null }
  | { outcome: "unauthorized" }
  | { outcome: "notConfigured" };

type RejectionReason = "unknown key" | "revoked" | "expired" | "unknown organization";

/** A verdict as the shared store holds it: with the instant it was decided (the deciding replica's clock, ms). */
type StoredVerdict = Verdict & { checkedAt?: number };

const parseVerdict = (raw: string | null): { verdict: Verdict; checkedAt?: number } | undefined => {
  if (raw === null) return undefined;
  try {
    const v = JSON.parse(raw) as StoredVerdict;
    const checkedAt = typeof v.checkedAt === "number" && Number.isFinite(v.checkedAt) ? v.checkedAt : undefined;
    if (v.outcome === "accepted" && typeof v.organizationId === "string" && typeof v.keyId === "string") {
      return { verdict: { outcome: "accepted", organizationId: v.organizationId, keyId: v.keyId, validUntil: v.validUntil ?? null }, checkedAt };
    }
    if (v.outcome === "unauthorized" || v.outcome === "notConfigured") return { verdict: { outcome: v.outcome }, checkedAt };
  } catch {
    // An unreadable entry is a cache miss.
  }
  return undefined;
};

/** Verdicts a replica keeps in its own memory at most (least recently decided dropped first). */
const LOCAL_VERDICTS_MAX = 10_000;

/** The earliest instant at which the key stops working on its own (expiry, or a revocation set ahead). */
const validUntil = (key: StoredKey): number | null => {
  const limits = [key.expiresAt, key.revokedAt].filter((d): d is Date => d !== null).map((d) => d.getTime());
  return limits.length ? Math.min(...limits) : null;
};

/**
 * Checks `Authorization: Bearer ak_...` against api_keys. Verdicts are cached in the shared store
 * under the secret's keyed hash (never the secret): a success for successTtlSeconds (so a revocation
 * takes effect within that time, while an expiry is enforced at its exact instant from the cached
 * validUntil), a rejection for rejectionTtlSeconds (per secret: another key is checked at once).
 */
export function createAuthenticator(options: AuthenticatorOptions): ManagedAuthenticator {
  const clock = options.clock ?? systemClock;
  const successTtlMs = (options.successTtlSeconds ?? 60) * 1000;
  const rejectionTtlMs = (options.rejectionTtlSeconds ?? 30) * 1000;
  const retryAfter = options.unavailableRetryAfterSeconds ?? 5;
  const prefix = options.keyPrefix ?? "exportsvc:";
  const cache = withLocalFallback(options.store, { clock });
  const log = options.logger;
  /** Concurrent first requests with one key share one database round trip. */
  const checksInFlight = new Map<string, Promise<Verdict>>();

  const cacheKey = (secretHash: string) => `${prefix}auth:${secretHash}`;
  const ttlOf = (verdict: Verdict) => (verdict.outcome === "accepted" ? successTtlMs : rejectionTtlMs);

  /**
   * The shared store's verdicts, also kept in this replica's memory until the instant the shared
   * entry expires (decided + its ttl): a repeat request skips the store's round trip, and a
   * revocation still takes effect within the same successTtlSeconds.
   */
  const local = new BoundedMap<string, { verdict: Verdict; until: number }>(LOCAL_VERDICTS_MAX);
  const remember = (secretHash: string, verdict: Verdict, checkedAt: number) => {
    const until = Math.min(checkedAt, clock.now()) + ttlOf(verdict);
    if (until <= clock.now()) return;
    local.set(secretHash, { verdict, until });
  };
  const recall = (secretHash: string): Verdict | undefined => {
    const entry = local.get(secretHash);
    if (!entry) return undefined;
    if (entry.until > clock.now()) return entry.verdict;
    local.delete(secretHash);
    return undefined;
  };

  const readCache = async (secretHash: string): Promise<Verdict | undefined> => {
    try {
      const cached = parseVerdict((await cache.run((s) => s.get(cacheKey(secretHash)))).value);
      // Entries written before verdicts carried their instant are used, not kept in memory.
      if (cached?.checkedAt !== undefined) remember(secretHash, cached.verdict, cached.checkedAt);
      return cached?.verdict;
    } catch (err) {
      log?.warn({ err: (err as Error).message }, "key cache unreadable; checking the key store");
      return undefined;
    }
  };

  const writeCache = async (secretHash: string, verdict: Verdict): Promise<void> => {
    const checkedAt = clock.now();
    remember(secretHash, verdict, checkedAt);
    try {
      const stored: StoredVerdict = { ...verdict, checkedAt };
      await cache.run((s) => s.set(cacheKey(secretHash), JSON.stringify(stored), ttlOf(verdict)));
    } catch (err) {
      log?.warn({ err: (err as Error).message }, "could not cache a key verdict");
    }
  };

  const rejected = (reason: RejectionReason, keyId?: string): Verdict => {
    log?.info({ keyId, reason }, "API key rejected");
    return { outcome: "unauthorized" };
  };

  const checkKeyStore = async (secretHash: string): Promise<Verdict> => {
    let key: StoredKey | undefined;
    try {
      key = await findKeyByHash(options.db, secretHash);
    } catch (err) {
      if (isDatabaseUnavailable(err)) {
        log?.warn({ err: (err as Error).message }, "key store unreachable");
        throw Errors.authUnavailable(retryAfter);
      }
      throw err;
    }
    const now = clock.now();
    if (!key || !hashesEqual(key.secretHash, secretHash)) return rejected("unknown key");
    if (key.revokedAt && key.revokedAt.getTime() <= now) return rejected("revoked", key.keyId);
    if (key.expiresAt && key.expiresAt.getTime() <= now) return rejected("expired", key.keyId);
    if (!key.organizationKnown) return rejected("unknown organization", key.keyId);
    if (!key.exportEnabled) {
      log?.info({ keyId: key.keyId, organizationId: key.organizationId }, "API key of an organization not enabled for export");
      return { outcome: "notConfigured" };
    }
    return { outcome: "accepted", organizationId: key.organizationId, keyId: key.keyId, validUntil: validUntil(key) };
  };

  const checkOnce = (secretHash: string): Promise<Verdict> => {
    const pending = checksInFlight.get(secretHash);
    if (pending) return pending;
    const check = checkKeyStore(secretHash)
      .then(async (verdict) => {
        await writeCache(secretHash, verdict);
        return verdict;
      })
      .finally(() => checksInFlight.delete(secretHash));
    checksInFlight.set(secretHash, check);
    return check;
  };

  const principalOf = (verdict: Verdict): Principal => {
    if (verdict.outcome === "notConfigured") throw Errors.organizationNotConfigured();
    if (verdict.outcome === "unauthorized") throw Errors.unauthorized();
    if (verdict.validUntil !== null && clock.now() >= verdict.validUntil) throw Errors.unauthorized();
    return { organizationId: verdict.organizationId, keyId: verdict.keyId };
  };

  return {
    async authenticate(authorizationHeader) {
      const secret = bearerSecret(authorizationHeader);
      if (!secret) throw Errors.unauthorized();
      const secretHash = hashApiKeySecret(secret, options.keyHashSecret);
      const cached = recall(secretHash) ?? (await readCache(secretHash));
      options.metrics?.recordAuthCacheLookup(cached === undefined ? "miss" : cached.outcome === "accepted" ? "hit" : "negative_hit");
      return principalOf(cached ?? (await checkOnce(secretHash)));
    },
    close: () => cache.close(),
  };
}
