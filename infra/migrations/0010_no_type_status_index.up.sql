-- idx_tasks_type_status (task_type, status, id) served one rare query, the
-- re-indexing of a resumed task type, and every task paid for it on its hot
-- path: two entries moved per status change (claim, outcome) besides the
-- one written at creation, 10-20 % of MariaDB's CPU in the throughput
-- benchmark. Waiting tasks are now paged through idx_tasks_status_next_run
-- in its own order (state, due time, id), filtered by type.
ALTER TABLE tasks DROP INDEX idx_tasks_type_status;
