-- The holes in task_history's IDs that the relay passed (taken for rolled
-- back after the grace) and still watches for a late row are stored with
-- the cursor, in the same statement, so a relay that takes the lease over
-- watches them too: every history row up to last_id has been published
-- except those in these holes, which are published when they turn up.
-- Format: comma-separated `from-to@until`, IDs inclusive, until in Unix ms.
ALTER TABLE event_relay
    ADD COLUMN watched MEDIUMTEXT NULL COMMENT 'holes below last_id still watched: from-to@until_unix_ms,...';
