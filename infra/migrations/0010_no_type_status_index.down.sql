CREATE INDEX idx_tasks_type_status ON tasks (task_type, status, id);
