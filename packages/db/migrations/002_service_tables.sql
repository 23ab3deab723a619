-- The export service's own tables (mapped with MikroORM in src/entities.ts).

-- Whether an organization is enabled for export. An organization without a row, or with
-- export_enabled = false, answers 404 ORGANIZATION_NOT_CONFIGURED.
CREATE TABLE export_organizations (
  organization_id uuid PRIMARY KEY,
  export_enabled boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- API keys. Only a keyed hash (HMAC-SHA256 with KEY_HASH_SECRET) of the secret is stored.
-- organization_id deliberately has no foreign key: a key tied to an unknown organization is a 401.
CREATE TABLE api_keys (
  id text PRIMARY KEY,
  organization_id uuid NOT NULL,
  secret_hash text NOT NULL UNIQUE,
  description text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz,
  revoked_at timestamptz
);
CREATE INDEX api_keys_organization ON api_keys (organization_id);

-- One row per dataset key an organization has (or had). Resource datasets and deviations are read
-- live; form datasets point at their materialized table. A retired key (form renamed) stays here so
-- that it is never reused and its name stays taken.
CREATE TABLE dataset_registry (
  organization_id uuid NOT NULL,
  key text NOT NULL,
  -- resource | deviations | submission | grid
  kind text NOT NULL,
  -- resource kind, or form id (+ grid path) for form datasets
  source_ref text NOT NULL,
  display_name text,
  parent_key text,
  -- [{key, dataType, label?, source}] in CSV order, without _cursor
  columns jsonb NOT NULL,
  -- source id -> assigned column key, kept across rebuilds so names stay stable
  name_assignments jsonb NOT NULL DEFAULT '{}'::jsonb,
  shape_fingerprint text NOT NULL,
  generation integer NOT NULL DEFAULT 1,
  -- ready | failed | retired
  state text NOT NULL DEFAULT 'ready',
  table_name text,
  error text,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (organization_id, key)
);
CREATE INDEX dataset_registry_source ON dataset_registry (organization_id, kind, source_ref);
