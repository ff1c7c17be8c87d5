-- Gray release: a task type's traffic is split between its stable executors
-- and a canary version by percent (see docs/rollout.md).
--
-- exec_version is the executor version that last claimed the task: set by
-- the claim, kept through retries, recoveries and re-runs, so a task that
-- ran on one version is routed to it again while the type has a rollout.
ALTER TABLE tasks ADD COLUMN exec_version VARCHAR(64) NULL AFTER executor_addr;

-- What routing needs, read with the type's settings (cached a second):
-- the canary version (NULL: no rollout, plain routing), the share of new
-- tasks it gets, and how long a task waits for an absent version before it
-- falls back.
ALTER TABLE task_types
    ADD COLUMN canary_version  VARCHAR(64) NULL,
    ADD COLUMN canary_percent  TINYINT     NOT NULL DEFAULT 0,
    ADD COLUMN canary_grace_ms BIGINT      NOT NULL DEFAULT 0;

-- One rollout per type: its plan, its guard and where it stands. revision
-- fences every change, so two reapers (or an operator and a reaper) never
-- both move one rollout.
CREATE TABLE type_rollouts (
    task_type        VARCHAR(128)  NOT NULL,
    canary_version   VARCHAR(64)   NOT NULL,
    steps            VARCHAR(255)  NOT NULL COMMENT 'percents, comma separated, increasing',
    step_index       INT           NOT NULL,
    percent          TINYINT       NOT NULL,
    step_ms          BIGINT        NOT NULL,
    grace_ms         BIGINT        NOT NULL,
    window_ms        BIGINT        NOT NULL,
    min_samples      INT           NOT NULL,
    max_p99_worse    DOUBLE        NOT NULL COMMENT 'fraction: 0.10 = canary p99 at most 10 % above stable',
    max_failure_diff DOUBLE        NOT NULL COMMENT 'failure rate points (fraction) canary may exceed stable by',
    max_timeout_diff DOUBLE        NOT NULL,
    state            VARCHAR(16)   NOT NULL COMMENT 'running, paused, rolled_back, promoted',
    revision         BIGINT        NOT NULL DEFAULT 1,
    step_started_at  DATETIME(3)   NOT NULL,
    created_at       DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    updated_at       DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (task_type)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Every move of a rollout, automatic or manual, with why and the figures
-- the guard saw.
CREATE TABLE rollout_log (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    task_type    VARCHAR(128)    NOT NULL,
    action       VARCHAR(32)     NOT NULL,
    from_percent TINYINT         NOT NULL,
    to_percent   TINYINT         NOT NULL,
    reason       VARCHAR(1024)   NOT NULL,
    figures      TEXT            NULL COMMENT 'JSON: both versions over the window',
    actor        VARCHAR(255)    NOT NULL,
    created_at   DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    KEY idx_rollout_log_type (task_type, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- One row per finished attempt of a type with a rollout, written by the
-- executor in the outcome's transaction: what the guard compares.
CREATE TABLE rollout_samples (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    task_type   VARCHAR(128)    NOT NULL,
    version     VARCHAR(64)     NOT NULL,
    outcome     VARCHAR(16)     NOT NULL COMMENT 'success, failed, timeout',
    duration_ms BIGINT          NOT NULL,
    finished_at DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    KEY idx_rollout_samples_type (task_type, finished_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
