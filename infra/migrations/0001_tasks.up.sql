-- Task types: what executors serve and the defaults a task inherits.
CREATE TABLE task_types (
    name            VARCHAR(128)  NOT NULL,
    timeout_ms      BIGINT        NOT NULL DEFAULT 300000,
    max_retries     INT           NOT NULL DEFAULT 3,
    priority        TINYINT       NOT NULL DEFAULT 1 COMMENT '0 high, 1 normal, 2 low',
    concurrency     INT           NOT NULL DEFAULT 0 COMMENT '0 = unlimited',
    backoff_base_ms BIGINT        NOT NULL DEFAULT 1000,
    backoff_cap_ms  BIGINT        NOT NULL DEFAULT 600000,
    fail_silently   BOOLEAN       NOT NULL DEFAULT FALSE,
    paused          BOOLEAN       NOT NULL DEFAULT FALSE,
    created_at      DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    updated_at      DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Tasks: the current state of every task. MySQL is the truth; Redis and NATS
-- only accelerate it.
CREATE TABLE tasks (
    id                  BIGINT UNSIGNED NOT NULL COMMENT 'snowflake, time ordered',
    task_type           VARCHAR(128)    NOT NULL,
    priority            TINYINT         NOT NULL COMMENT '0 high, 1 normal, 2 low',
    -- VARBINARY: compared byte for byte with no pad, so "a", "A" and "a " are
    -- three different keys.
    biz_key             VARBINARY(255)  NULL,
    payload             MEDIUMBLOB      NULL,
    status              VARCHAR(16)     NOT NULL,
    next_run_time       BIGINT          NOT NULL COMMENT 'unix ms on the scheduler (Redis TIME) clock',
    attempt             INT             NOT NULL DEFAULT 0 COMMENT 'fencing token: +1 on every claim',
    retry_count         INT             NOT NULL DEFAULT 0,
    max_retry_count     INT             NOT NULL,
    timeout_ms          BIGINT          NOT NULL,
    executor_addr       VARCHAR(255)    NULL,
    last_heartbeat_time DATETIME(3)     NULL,
    dispatched_at       DATETIME(3)     NULL COMMENT 'last hand-off to executors; reconcilers re-drive stale ones',
    last_error          TEXT            NULL,
    parent_task_id      BIGINT UNSIGNED NULL,
    created_at          DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    updated_at          DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    UNIQUE KEY uk_tasks_type_biz_key (task_type, biz_key),
    KEY idx_tasks_status_next_run (status, next_run_time),
    KEY idx_tasks_status_heartbeat (status, last_heartbeat_time)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Every transfer of every task, in order. The event published for a row
-- carries the same event_id.
CREATE TABLE task_history (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    task_id     BIGINT UNSIGNED NOT NULL,
    from_status VARCHAR(16)     NOT NULL COMMENT 'empty for the creating row',
    to_status   VARCHAR(16)     NOT NULL,
    attempt     INT             NOT NULL,
    reason      VARCHAR(2048)   NOT NULL,
    actor       VARCHAR(255)    NOT NULL,
    event_id    CHAR(26)        NOT NULL,
    created_at  DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id),
    KEY idx_task_history_task (task_id, id),
    UNIQUE KEY uk_task_history_event (event_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Transactional outbox: rows written in the same transaction as the change
-- they describe, moved to JetStream by the relay and then deleted.
CREATE TABLE outbox (
    id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    event_id   CHAR(26)        NOT NULL,
    subject    VARCHAR(255)    NOT NULL,
    event_type VARCHAR(64)     NOT NULL,
    correlation_id VARCHAR(64) NOT NULL,
    payload    BLOB            NOT NULL,
    created_at DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
