-- The workflow of a task and its part in it, recorded when the task is
-- created, so that the transfer ending a step or a compensation finds its
-- workflow on the row it locks instead of searching workflow_steps (one
-- statement fewer in the outcome transaction of every workflow task):
--   workflow_id    the workflow of a step or compensation; NULL otherwise.
--   workflow_role  bits: 1 a step, 2 a compensation, 8 a step re-run from
--                  a dead letter after it ended (its ends no longer count:
--                  looked up as before); 0 a DAG task in no workflow. NULL
--                  is unknown (tasks outside DAGs, rows written before this
--                  migration): looked up in workflow_steps, as before.
-- Nullable columns added at the end, which MariaDB adds in place.
ALTER TABLE tasks
    ADD COLUMN workflow_id BIGINT UNSIGNED NULL COMMENT 'workflow of a step or compensation',
    ADD COLUMN workflow_role TINYINT UNSIGNED NULL COMMENT '1 step, 2 compensation, 8 re-run after it ended; 0 none; NULL unknown';
