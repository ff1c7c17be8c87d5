ALTER TABLE tasks ADD COLUMN dispatched_at DATETIME(3) NULL COMMENT 'last hand-off to executors; reconcilers re-drive stale ones' AFTER last_heartbeat_time;
