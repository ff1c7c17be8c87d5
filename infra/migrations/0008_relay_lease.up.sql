-- One relay at a time walks task_history: the holder of a time-bounded
-- lease on the cursor row. The lease is a row value with an expiry on the
-- MySQL clock, never a held lock, so a relay that stops mid-pass (a paused
-- VM, SIGSTOP) stops events only until its lease runs out. The holder keeps
-- the cursor in memory and writes it back when it renews the lease; the
-- write is fenced by holder, so a relay that lost the lease cannot move it.
ALTER TABLE event_relay
    ADD COLUMN holder      VARCHAR(191)    NOT NULL DEFAULT '' COMMENT 'relay holding the lease; empty: free',
    ADD COLUMN lease_until DATETIME(3)     NULL COMMENT 'MySQL clock; past: free to take',
    ADD COLUMN lease_seq   BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'bumped by every take and renewal';
