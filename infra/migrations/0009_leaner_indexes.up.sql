-- Two secondary indexes that every task paid for on its hot path and no
-- query needs:
--
-- uk_task_history_event: event IDs are ULIDs ax generates for every
-- history row; nothing looks a row up by one, and JetStream de-duplicates
-- events by it. The unique index cost every history insert (three per
-- task) a uniqueness check and an index entry.
--
-- idx_tasks_status_heartbeat: the reaper's queries select RUNNING tasks,
-- which are at most the executors' total concurrency, so the status prefix
-- of idx_tasks_status_next_run serves them. The index cost every claim and
-- every outcome (status and heartbeat change) and every heartbeat an entry
-- moved.
ALTER TABLE task_history DROP INDEX uk_task_history_event;
ALTER TABLE tasks DROP INDEX idx_tasks_status_heartbeat;
