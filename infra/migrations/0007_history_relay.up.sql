-- Events are published from task_history itself: a history row carries
-- everything its TaskTransferred event says, and the relay walks the table
-- with a gap-safe cursor (event_relay) instead of copying every row into
-- the outbox and deleting it again. The outbox stays for events that are
-- not task transfers (task types) and for rows written before this
-- migration.
--
-- task_type is empty on rows written before this migration: their events
-- went through the outbox, so the history relay passes over them.
ALTER TABLE task_history
    ADD COLUMN task_type     VARCHAR(128) NOT NULL DEFAULT '' COMMENT 'empty: written before 0007, published through the outbox',
    ADD COLUMN priority      TINYINT      NOT NULL DEFAULT 1 COMMENT 'lane: 0 high, 1 normal, 2 low',
    ADD COLUMN next_run_time BIGINT       NOT NULL DEFAULT 0 COMMENT 'unix ms on the scheduler clock, as of this transfer',
    ADD COLUMN rejected      BOOLEAN      NOT NULL DEFAULT FALSE COMMENT 'a refused write, published as task.rejected',
    ADD COLUMN route         TINYINT      NOT NULL DEFAULT 0 COMMENT 'READY: 0 timer, 1 dispatcher, 2 dispatched by the writer';

-- One row per relayed table: every history row with id <= last_id has been
-- published (or passed over as written before 0007). Relays only move it
-- forward, each with one statement; none holds its lock across a pass.
CREATE TABLE event_relay (
    name       VARCHAR(64)     NOT NULL,
    last_id    BIGINT UNSIGNED NOT NULL,
    updated_at DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

INSERT INTO event_relay (name, last_id) SELECT 'task_history', COALESCE(MAX(id), 0) FROM task_history;
