-- When the current attempt started: the reaper's timeout check needs it,
-- and heartbeats move updated_at.
ALTER TABLE tasks ADD COLUMN started_at DATETIME(3) NULL AFTER last_heartbeat_time;

-- Manual-intervention table: one row per task that failed for good.
CREATE TABLE dead_letters (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    task_id     BIGINT UNSIGNED NOT NULL,
    task_type   VARCHAR(128)    NOT NULL,
    status      VARCHAR(16)     NOT NULL COMMENT 'FAILED or TIMEOUT: how the last attempt ended',
    attempt     INT             NOT NULL,
    retry_count INT             NOT NULL,
    last_error  TEXT            NOT NULL,
    created_at  DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    retried_at  DATETIME(3)     NULL,
    retried_by  VARCHAR(255)    NULL,
    PRIMARY KEY (id),
    KEY idx_dead_letters_task (task_id),
    KEY idx_dead_letters_open (retried_at, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
