-- Lets the reaper prune idempotency keys older than the configured
-- retention in small batches, oldest first, without scanning the table.
CREATE INDEX idx_idempotency_created ON idempotency_keys (created_at);
