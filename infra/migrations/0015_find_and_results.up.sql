-- Listing tasks of one type newest first (GET /v1/tasks?type=) pages
-- through (task_type, id). Neither column ever changes, so the index costs
-- one entry written at creation and nothing on any transfer, unlike an
-- index holding status (see 0010). Lists filtered by state use
-- idx_tasks_status_next_run; lists without a type or state use the primary
-- key, whose snowflake IDs are in creation order.
CREATE INDEX idx_tasks_type_id ON tasks (task_type, id);

-- What a handler returned (at most 64 KiB, JSON) and how far a long run
-- has got: a percentage and a message the handler sets, written at a
-- bounded rate, fenced by the attempt.
ALTER TABLE tasks
    ADD COLUMN result           MEDIUMBLOB    NULL AFTER last_error,
    ADD COLUMN progress_pct     TINYINT       NULL AFTER result,
    ADD COLUMN progress_message VARCHAR(255)  NULL AFTER progress_pct,
    ADD COLUMN progress_at      DATETIME(3)   NULL AFTER progress_message;
