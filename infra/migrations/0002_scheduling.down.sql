ALTER TABLE outbox MODIFY correlation_id VARCHAR(64) NOT NULL;
DROP INDEX idx_tasks_type_status ON tasks;
