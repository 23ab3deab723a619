-- Source model: the captured data that exports read. Every table carries organization_id and has it
-- first in its primary key, so the data can be distributed by organization (e.g. Citus) unchanged.
-- Related-record references (site_id, product_id, ...) carry no foreign keys on purpose: deleting a
-- related record leaves the id in place and its exported name empty, as docs/contract.md §8 requires.

CREATE TABLE organizations (
  id uuid PRIMARY KEY,
  name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sites (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  parent_id uuid,
  name text NOT NULL,
  -- IANA zone name; blank is possible in the source and blocks form dataset rebuilds.
  time_zone text NOT NULL DEFAULT 'UTC',
  -- Site ids, outermost first, joined by dots; maintained by the loader.
  path text NOT NULL DEFAULT '',
  last_modified timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);

CREATE TABLE teams (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  name text NOT NULL,
  last_modified timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);

CREATE TABLE employees (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  first_name text,
  last_name text,
  job_title text,
  access_level text,
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  last_modified timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);

CREATE TABLE employee_teams (
  organization_id uuid NOT NULL,
  employee_id uuid NOT NULL,
  team_id uuid NOT NULL,
  PRIMARY KEY (organization_id, employee_id, team_id),
  FOREIGN KEY (organization_id, employee_id) REFERENCES employees(organization_id, id) ON DELETE CASCADE
);

CREATE TABLE employee_sites (
  organization_id uuid NOT NULL,
  employee_id uuid NOT NULL,
  site_id uuid NOT NULL,
  PRIMARY KEY (organization_id, employee_id, site_id),
  FOREIGN KEY (organization_id, employee_id) REFERENCES employees(organization_id, id) ON DELETE CASCADE
);

-- Custom attributes: definitions per resource kind; values live in each resource row's
-- `attributes` object keyed by definition id, stored as entered (they may not fit their type).
CREATE TABLE custom_attribute_definitions (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  resource_kind text NOT NULL CHECK (resource_kind IN
    ('suppliers','customers','products','product_categories','equipment','chemicals','employees','areas','lots','recipes')),
  key text NOT NULL,
  name text NOT NULL,
  type text NOT NULL CHECK (type IN ('Text','Number','Date','DateTime','Document','SingleDocument','Select','MultiSelect','Boolean','Url','Email','Phone')),
  position integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);
CREATE INDEX custom_attribute_definitions_kind ON custom_attribute_definitions (organization_id, resource_kind, position, created_at, id);

CREATE TABLE suppliers (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  name text, description text, website_url text, status text, market text, type text,
  street1 text, street2 text, city text, region text, zip_code text, country text,
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  last_modified timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);

CREATE TABLE supplier_parents (
  organization_id uuid NOT NULL,
  supplier_id uuid NOT NULL,
  parent_supplier_id uuid NOT NULL,
  PRIMARY KEY (organization_id, supplier_id, parent_supplier_id),
  FOREIGN KEY (organization_id, supplier_id) REFERENCES suppliers(organization_id, id) ON DELETE CASCADE
);

CREATE TABLE customers (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  name text, description text, website_url text, phone_number text,
  street1 text, street2 text, city text, region text, zip_code text, country text,
  contact_first_name text, contact_last_name text, contact_email text, contact_phone text,
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  last_modified timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);

CREATE TABLE product_categories (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  name text, description text,
  parent_id uuid,
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  last_modified timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);

CREATE TABLE products (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  name text, description text, product_code text,
  -- 0 RawMaterial, 1 WorkInProgress, 2 FinishedGood, 3 Packaging; other values export as the number.
  product_type integer,
  product_category_id uuid,
  allergen_status text,
  default_shelf_life_quantity numeric,
  default_shelf_life_unit text,
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  last_modified timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);

CREATE TABLE product_allergens (
  organization_id uuid NOT NULL,
  product_id uuid NOT NULL,
  allergen text NOT NULL,
  PRIMARY KEY (organization_id, product_id, allergen),
  FOREIGN KEY (organization_id, product_id) REFERENCES products(organization_id, id) ON DELETE CASCADE
);

CREATE TABLE product_sites (
  organization_id uuid NOT NULL,
  product_id uuid NOT NULL,
  site_id uuid NOT NULL,
  PRIMARY KEY (organization_id, product_id, site_id),
  FOREIGN KEY (organization_id, product_id) REFERENCES products(organization_id, id) ON DELETE CASCADE
);

-- Which products a supplier supplies (suppliers.products and products.suppliers).
CREATE TABLE supplier_products (
  organization_id uuid NOT NULL,
  supplier_id uuid NOT NULL,
  product_id uuid NOT NULL,
  PRIMARY KEY (organization_id, supplier_id, product_id)
);
CREATE INDEX supplier_products_product ON supplier_products (organization_id, product_id);

-- Which products a customer buys (customers.products and products.customers).
CREATE TABLE customer_products (
  organization_id uuid NOT NULL,
  customer_id uuid NOT NULL,
  product_id uuid NOT NULL,
  PRIMARY KEY (organization_id, customer_id, product_id)
);
CREATE INDEX customer_products_product ON customer_products (organization_id, product_id);

CREATE TABLE areas (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  name text, description text, type text,
  size numeric, size_unit text,
  parent_id uuid,
  site_id uuid,
  -- Area ids, outermost first, ending with this area's own id, joined by dots; maintained by the loader.
  path text NOT NULL DEFAULT '',
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  last_modified timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);

CREATE TABLE equipment (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  name text, make text, model text, serial_number text,
  site_id uuid,
  area_id uuid,
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  last_modified timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);

CREATE TABLE chemicals (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  name text, type text, grade text, production_method text,
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  last_modified timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);

CREATE TABLE chemical_sites (
  organization_id uuid NOT NULL,
  chemical_id uuid NOT NULL,
  site_id uuid NOT NULL,
  PRIMARY KEY (organization_id, chemical_id, site_id),
  FOREIGN KEY (organization_id, chemical_id) REFERENCES chemicals(organization_id, id) ON DELETE CASCADE
);

CREATE TABLE lots (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  code text, description text, status text,
  quantity numeric, unit text,
  expiry_date date, date_received date, date_produced date,
  product_id uuid,
  site_id uuid,
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  last_modified timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);

CREATE TABLE recipes (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  name text, description text, status text,
  output_quantity numeric, output_unit text,
  has_unpublished_changes boolean NOT NULL DEFAULT false,
  output_product_id uuid,
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  last_modified timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);

CREATE TABLE documents (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  name text, type text, about text,
  -- Draft, InReview, Published, Rejected
  status text NOT NULL DEFAULT 'Draft',
  is_archived boolean NOT NULL DEFAULT false,
  last_modified timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);

CREATE TABLE document_versions (
  organization_id uuid NOT NULL,
  id uuid NOT NULL,
  document_id uuid NOT NULL,
  version_label text NOT NULL,
  -- At most one version of a document is the currently published one.
  is_current_published boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id),
  FOREIGN KEY (organization_id, document_id) REFERENCES documents(organization_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX document_versions_one_published ON document_versions (organization_id, document_id) WHERE is_current_published;

CREATE TABLE document_sites (
  organization_id uuid NOT NULL,
  document_id uuid NOT NULL,
  site_id uuid NOT NULL,
  PRIMARY KEY (organization_id, document_id, site_id),
  FOREIGN KEY (organization_id, document_id) REFERENCES documents(organization_id, id) ON DELETE CASCADE
);

CREATE TABLE document_teams (
  organization_id uuid NOT NULL,
  document_id uuid NOT NULL,
  team_id uuid NOT NULL,
  PRIMARY KEY (organization_id, document_id, team_id),
  FOREIGN KEY (organization_id, document_id) REFERENCES documents(organization_id, id) ON DELETE CASCADE
);

-- Forms: a form has versions; publishing a version makes its field list current.
CREATE TABLE forms (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  name text NOT NULL,
  -- Record codes are '<record_prefix>-<counter>'.
  record_prefix text NOT NULL,
  record_counter integer NOT NULL DEFAULT 0,
  deleted_at timestamptz,
  last_modified timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);

CREATE TABLE form_versions (
  organization_id uuid NOT NULL,
  form_id uuid NOT NULL,
  version integer NOT NULL,
  -- The field tree (see docs/source-model.md); grids nest their own fields.
  fields jsonb NOT NULL DEFAULT '[]'::jsonb,
  published_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, form_id, version),
  FOREIGN KEY (organization_id, form_id) REFERENCES forms(organization_id, id) ON DELETE CASCADE
);

CREATE TABLE submissions (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  form_id uuid NOT NULL,
  form_version integer,
  record_id text NOT NULL,
  site_id uuid,
  -- InProgress, Completed, Cancelled
  status text NOT NULL DEFAULT 'InProgress',
  is_archived boolean NOT NULL DEFAULT false,
  started_at timestamptz,
  completed_at timestamptz,
  -- Field values keyed by field id; grid values are arrays of row objects.
  "values" jsonb NOT NULL DEFAULT '{}'::jsonb,
  -- Field id -> UTC instant at which the field's value was verified (fields needing verification).
  verifications jsonb NOT NULL DEFAULT '{}'::jsonb,
  last_modified timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);
CREATE INDEX submissions_form ON submissions (organization_id, form_id, last_modified, id);

CREATE TABLE submission_steps (
  organization_id uuid NOT NULL,
  id uuid NOT NULL,
  submission_id uuid NOT NULL,
  name text NOT NULL,
  -- Recording or Verification
  kind text NOT NULL DEFAULT 'Recording',
  -- Pending, InProgress, Completed, Skipped
  status text NOT NULL DEFAULT 'Pending',
  position integer NOT NULL DEFAULT 0,
  PRIMARY KEY (organization_id, id),
  FOREIGN KEY (organization_id, submission_id) REFERENCES submissions(organization_id, id) ON DELETE CASCADE
);

CREATE TABLE deviations (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  code text NOT NULL,
  submission_id uuid NOT NULL,
  step_id uuid,
  -- Low, Medium, High, Critical
  severity text NOT NULL,
  -- Open, InProgress, Resolved
  status text NOT NULL DEFAULT 'Open',
  -- LinkedResolutionRecord or Comment; null while unresolved
  resolution_type text,
  field_key text, field_label text, display_value text,
  row_id text,
  assigned_user_id uuid,
  assigned_team_id uuid,
  supplier_id uuid,
  comment text,
  resolution_comment text,
  resolved_by_id uuid,
  resolved_at timestamptz,
  signed_by_id uuid,
  signed_at timestamptz,
  linked_record_id uuid,
  linked_resolution_comment text,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_modified timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id),
  FOREIGN KEY (organization_id, submission_id) REFERENCES submissions(organization_id, id) ON DELETE CASCADE
);

-- Export order indexes: (last_modified, id) within an organization.
CREATE INDEX suppliers_export ON suppliers (organization_id, last_modified, id);
CREATE INDEX customers_export ON customers (organization_id, last_modified, id);
CREATE INDEX products_export ON products (organization_id, last_modified, id);
CREATE INDEX product_categories_export ON product_categories (organization_id, last_modified, id);
CREATE INDEX equipment_export ON equipment (organization_id, last_modified, id);
CREATE INDEX chemicals_export ON chemicals (organization_id, last_modified, id);
CREATE INDEX employees_export ON employees (organization_id, last_modified, id);
CREATE INDEX areas_export ON areas (organization_id, last_modified, id);
CREATE INDEX lots_export ON lots (organization_id, last_modified, id);
CREATE INDEX recipes_export ON recipes (organization_id, last_modified, id);
CREATE INDEX documents_export ON documents (organization_id, last_modified, id);
CREATE INDEX deviations_export ON deviations (organization_id, last_modified, id);
