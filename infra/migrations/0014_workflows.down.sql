DROP TABLE workflow_steps;
DROP TABLE workflows;
DROP TABLE task_dependencies;
ALTER TABLE tasks
    DROP COLUMN dag,
    ADD COLUMN parent_task_id BIGINT UNSIGNED NULL AFTER last_error;
