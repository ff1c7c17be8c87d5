ALTER TABLE tasks DROP COLUMN workflow_role, DROP COLUMN workflow_id;
