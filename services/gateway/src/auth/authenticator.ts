import { Errors, hashApiKeySecret, hashesEqual, type Logger } from "@exportsvc/common";
import { isDatabaseUnavailable } from "@exportsvc/db";
import type { Authenticator, Principal } from "../contracts";
import { systemClock, withLocalFallback, type Clock, type SharedStore } from "../store";
import { bearerSecret } from "./bearer";
import { findKeyByHash, type Queryable, type StoredKey } from "./key-lookup";

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

const parseVerdict = (raw: string | null): Verdict | undefined => {
  if (raw === null) return undefined;
  try {
    const v = JSON.parse(raw) as Verdict;
    if (v.outcome === "accepted" && typeof v.organizationId === "string" && typeof v.keyId === "string") return v;
    if (v.outcome === "unauthorized" || v.outcome === "notConfigured") return { outcome: v.outcome };
  } catch {
    // An unreadable entry is a cache miss.
  }
  return undefined;
};

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

  const readCache = async (secretHash: string): Promise<Verdict | undefined> => {
    try {
      return parseVerdict((await cache.run((s) => s.get(cacheKey(secretHash)))).value);
    } catch (err) {
      log?.warn({ err: (err as Error).message }, "key cache unreadable; checking the key store");
      return undefined;
    }
  };

  const writeCache = async (secretHash: string, verdict: Verdict): Promise<void> => {
    const ttl = verdict.outcome === "accepted" ? successTtlMs : rejectionTtlMs;
    try {
      await cache.run((s) => s.set(cacheKey(secretHash), JSON.stringify(verdict), ttl));
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
      const verdict = (await readCache(secretHash)) ?? (await checkOnce(secretHash));
      return principalOf(verdict);
    },
    close: () => cache.close(),
  };
}
