-- A verifier of KEY_HASH_SECRET (HMAC-SHA256 of a fixed label keyed by the secret; it does not reveal
-- the secret), recorded by the first `exportctl keys issue`. Later issues compare their secret with
-- it and refuse on a mismatch: a key hashed with the wrong pepper would be stored, listed as active
-- and answer 401 forever. One row for the whole installation, like the secret itself (no
-- organization_id: it is not tenant data and is never sharded).
CREATE TABLE key_hash_secret_verifier (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  verifier text NOT NULL,
  recorded_at timestamptz NOT NULL DEFAULT now()
);
