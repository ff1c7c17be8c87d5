-- Schedules: periodic tasks. Every timer replica fires them; the unique
-- key of schedule_fires, not a lock, makes each fire time one task.
CREATE TABLE schedules (
    id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    name           VARCHAR(128)    NOT NULL,
    cron_expr      VARCHAR(255)    NOT NULL,
    time_zone      VARCHAR(64)     NOT NULL COMMENT 'IANA zone the expression is read in',
    template       MEDIUMBLOB      NOT NULL COMMENT 'JSON task template: type, payload, priority, max_retries, timeout',
    overlap        VARCHAR(8)      NOT NULL COMMENT 'allow or skip (while the last fire''s task is not final)',
    catch_up       VARCHAR(8)      NOT NULL COMMENT 'skip, last or all: missed fire times after downtime',
    catch_up_limit INT             NOT NULL,
    paused         BOOLEAN         NOT NULL DEFAULT FALSE,
    next_fire_time BIGINT          NOT NULL COMMENT 'unix ms on the scheduler (Redis TIME) clock',
    last_fire_time BIGINT          NULL,
    last_task_id   BIGINT UNSIGNED NULL COMMENT 'the task of the last fire, for overlap skip',
    created_at     DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    updated_at     DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    UNIQUE KEY uk_schedules_name (name),
    KEY idx_schedules_due (paused, next_fire_time)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- One row per fired fire time: the primary key is the arbiter, so a second
-- timer firing the same (schedule, fire time) fails its INSERT and rolls
-- back its task. task_id is NULL for a fire time passed over by the overlap
-- policy. The name is kept so that a task's origin outlives its schedule.
CREATE TABLE schedule_fires (
    schedule_id   BIGINT UNSIGNED NOT NULL,
    fire_time     BIGINT          NOT NULL COMMENT 'unix ms',
    schedule_name VARCHAR(128)    NOT NULL,
    task_id       BIGINT UNSIGNED NULL,
    fired_at      BIGINT          NOT NULL COMMENT 'unix ms on the scheduler clock when it fired: never before fire_time',
    PRIMARY KEY (schedule_id, fire_time),
    KEY idx_schedule_fires_task (task_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
