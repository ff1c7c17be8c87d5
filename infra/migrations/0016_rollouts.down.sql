-- Loses every rollout, its log and samples, and which version ran each
-- task: types route as if no rollout had ever been started.
DROP TABLE rollout_samples;
DROP TABLE rollout_log;
DROP TABLE type_rollouts;
ALTER TABLE task_types DROP COLUMN canary_grace_ms, DROP COLUMN canary_percent, DROP COLUMN canary_version;
ALTER TABLE tasks DROP COLUMN exec_version;
