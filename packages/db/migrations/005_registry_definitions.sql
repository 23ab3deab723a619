-- Fingerprints of the code-defined dataset definitions (e.g. the fixed datasets' core columns) the
-- registry was last brought in line with. When a deploy changes them, the schema service re-queues
-- every organization once at start-up, so a new core column reaches every registry without waiting
-- for that organization's next custom attribute change.
CREATE TABLE registry_definitions (
  name text PRIMARY KEY,
  fingerprint text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
