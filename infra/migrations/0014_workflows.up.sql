-- Workflows: DAGs of tasks with conditions, compensation and lineage.
--
-- A task that takes part in a dependency (as parent or child), a workflow
-- step or a compensation has dag = 1: the transfer that makes it final
-- looks for children to release only then, so an ordinary task pays
-- nothing. parent_task_id, which nothing ever read, gives way to
-- task_dependencies, which can hold many parents per task.
ALTER TABLE tasks
    ADD COLUMN dag TINYINT(1) NOT NULL DEFAULT 0 COMMENT '1: in a dependency, workflow step or compensation',
    DROP COLUMN parent_task_id;

-- One edge of a DAG: child runs when parent ends in a state its condition
-- accepts. parent_status is the parent's final state, written by the
-- parent's final transfer while it holds the child's row lock, so that two
-- parents ending at once never both miss each other.
CREATE TABLE task_dependencies (
    parent_id     BIGINT UNSIGNED NOT NULL,
    child_id      BIGINT UNSIGNED NOT NULL,
    cond          VARCHAR(8)      NOT NULL COMMENT 'success, failure or always',
    parent_status VARCHAR(16)     NULL COMMENT 'the parent''s final state once it has one',
    PRIMARY KEY (parent_id, child_id),
    KEY idx_task_dependencies_child (child_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- A workflow: a named set of steps created together.
CREATE TABLE workflows (
    id          BIGINT UNSIGNED NOT NULL COMMENT 'snowflake',
    name        VARCHAR(128)    NOT NULL,
    biz_key     VARBINARY(255)  NULL,
    status      VARCHAR(24)     NOT NULL COMMENT 'RUNNING, SUCCEEDED, FAILED, COMPENSATING, COMPENSATED, COMPENSATION_FAILED, CANCELLED',
    reason      VARCHAR(2048)   NOT NULL DEFAULT '',
    open_steps  INT             NOT NULL COMMENT 'steps not yet final',
    open_compensations INT      NOT NULL DEFAULT 0 COMMENT 'compensations started and not yet final',
    compensation_failed TINYINT(1) NOT NULL DEFAULT 0,
    created_at  DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    updated_at  DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    UNIQUE KEY uk_workflows_name_biz_key (name, biz_key),
    KEY idx_workflows_biz_key (biz_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- The steps of a workflow, in topological order (position), each an
-- ordinary task. compensation_task_id is the task that undoes the step:
-- created SUSPEND with the workflow, started if a later step fails for
-- good, cancelled when it is not needed. final_status is the step's final
-- state, written under the workflow's row lock, so the workflow's
-- decisions never read a task row another transaction is changing.
CREATE TABLE workflow_steps (
    workflow_id          BIGINT UNSIGNED NOT NULL,
    step_key             VARCHAR(128)    NOT NULL,
    position             INT             NOT NULL,
    task_id              BIGINT UNSIGNED NOT NULL,
    compensation_task_id BIGINT UNSIGNED NULL,
    final_status         VARCHAR(16)     NULL,
    PRIMARY KEY (workflow_id, step_key),
    UNIQUE KEY uk_workflow_steps_task (task_id),
    UNIQUE KEY uk_workflow_steps_compensation (compensation_task_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
