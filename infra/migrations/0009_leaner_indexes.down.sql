ALTER TABLE tasks ADD KEY idx_tasks_status_heartbeat (status, last_heartbeat_time);
ALTER TABLE task_history ADD UNIQUE KEY uk_task_history_event (event_id);
