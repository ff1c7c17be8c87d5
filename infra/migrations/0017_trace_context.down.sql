ALTER TABLE task_history DROP COLUMN trace_parent;
ALTER TABLE tasks DROP COLUMN trace_parent;
