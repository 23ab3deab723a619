import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

function base62(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      // Rejection sampling keeps the alphabet uniform (248 = 4 * 62).
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}

export interface IssuedKey {
  /** Public identifier: ak_ + 16 base62 characters. Sending it as a token gives a 401. */
  id: string;
  /** The secret (the bearer token): ak_ + 40 base62 characters (≈238 bits). Shown once. */
  secret: string;
}

export function generateApiKey(): IssuedKey {
  return { id: `ak_${base62(16)}`, secret: `ak_${base62(40)}` };
}

/** Keyed hash of a secret; only this is stored (api_keys.secret_hash). */
export function hashApiKeySecret(secret: string, pepper: string): string {
  return createHmac("sha256", pepper).update(secret, "utf8").digest("hex");
}

/**
 * A verifier of the pepper itself (HMAC of a fixed label keyed by it): stored once, it lets a tool
 * tell that it was given another KEY_HASH_SECRET than the one the stored keys were hashed with,
 * without storing or revealing the secret.
 */
export function keyHashSecretVerifier(pepper: string): string {
  return createHmac("sha256", pepper).update("dataset-export/key-hash-secret-verifier/v1", "utf8").digest("hex");
}

/** Constant-time comparison of two hex hashes. */
export function hashesEqual(a: string, b: string): boolean {
  const ba = Buffer.from(a, "hex");
  const bb = Buffer.from(b, "hex");
  return ba.length === bb.length && ba.length > 0 && timingSafeEqual(ba, bb);
}

/** Syntactic check of a bearer token: ak_ followed by base62 characters of a secret's length. */
export const SECRET_PATTERN = /^ak_[0-9A-Za-z]{40}$/;
