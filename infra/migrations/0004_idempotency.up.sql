-- Idempotency keys: one row per side effect that has happened. The primary
-- key is the arbiter: a second INSERT of the same (scope, idem_key) fails, or
-- waits for the first transaction and then fails, so the effect guarded by
-- the key runs at most once however often a task is delivered or resubmitted.
CREATE TABLE idempotency_keys (
    scope      VARCHAR(128)    NOT NULL COMMENT 'the task type',
    -- VARBINARY: compared byte for byte with no pad, so "a", "A" and "a " are
    -- three different keys.
    idem_key   VARBINARY(255)  NOT NULL,
    task_id    BIGINT UNSIGNED NOT NULL COMMENT 'the task whose run recorded the key',
    attempt    INT             NOT NULL,
    created_at DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (scope, idem_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
