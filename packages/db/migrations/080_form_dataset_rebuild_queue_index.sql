-- Rebuild requests are claimed round-robin by organization (OrganizationRotation in
-- packages/form-datasets): "the next organization after X with a pending rebuild". The primary key
-- (organization_id, seq) would walk every pending submission change of the organizations on the
-- way; this partial index holds only the rebuild requests.
CREATE INDEX form_dataset_changes_rebuilds ON form_dataset_changes (organization_id, seq) WHERE kind = 'rebuild';
