ALTER TABLE tasks
    DROP COLUMN progress_at,
    DROP COLUMN progress_message,
    DROP COLUMN progress_pct,
    DROP COLUMN result;
DROP INDEX idx_tasks_type_id ON tasks;
