ALTER TABLE workflows DROP INDEX idx_workflows_status_id;
