DROP INDEX idx_idempotency_created ON idempotency_keys;
