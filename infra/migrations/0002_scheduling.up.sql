-- Re-indexing a resumed task type reads its READY tasks in id order.
CREATE INDEX idx_tasks_type_status ON tasks (task_type, status, id);

-- Type events are correlated by the type name, up to 128 characters.
ALTER TABLE outbox MODIFY correlation_id VARCHAR(255) NOT NULL;
