-- Child rows are looked up by their owner (the loader compares a submission's steps and a document's
-- versions with the stored ones; exports read a submission's steps): without these indexes each
-- lookup scans every step / version of the organization.
CREATE INDEX IF NOT EXISTS submission_steps_submission ON submission_steps (organization_id, submission_id, position);
CREATE INDEX IF NOT EXISTS document_versions_document ON document_versions (organization_id, document_id);
