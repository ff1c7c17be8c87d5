-- The W3C trace context (a `traceparent`, 55 characters) a task was
-- submitted under, or the one ax started for it: every span of the task,
-- in any service, joins that trace. NULL for tasks submitted while tracing
-- was off without a caller's context. The history row carries it too, so
-- the relay puts it in the event's headers without reading the task.
-- Both are nullable columns added at the end, which MariaDB adds in place
-- without copying the tables.
ALTER TABLE tasks ADD COLUMN trace_parent VARCHAR(55) NULL;
ALTER TABLE task_history ADD COLUMN trace_parent VARCHAR(55) NULL;
