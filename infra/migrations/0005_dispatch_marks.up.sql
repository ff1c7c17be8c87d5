-- Dispatch marks moved to Redis (the dispatcher's sorted set
-- ax:{sched}:dispatched): writing them into tasks locked the very rows the
-- executors were claiming, and they are only a hint for the reconciler.
ALTER TABLE tasks DROP COLUMN dispatched_at;
