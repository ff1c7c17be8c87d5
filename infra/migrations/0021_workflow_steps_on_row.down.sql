-- Back to workflow_steps for every workflow: the steps listed on a
-- workflow's row become rows again, so that builds before 0021 find them.
-- final_status stays NULL, as for a step of a workflow without
-- compensations that succeeded; a step that ended otherwise is only read
-- by a re-run from a dead letter, whose end is then counted once more.
-- Bits 16 and 32 of tasks.workflow_role are left: builds before 0021
-- ignore them. A workflow still running counts its open steps afresh, as
-- builds before 0021 count every step, not only those without children.
INSERT INTO workflow_steps (workflow_id, step_key, position, task_id)
SELECT w.id, s.step_key, s.position - 1, s.task_id
FROM workflows w, JSON_TABLE(w.steps, '$[*]' COLUMNS (
    position FOR ORDINALITY,
    step_key VARCHAR(128) PATH '$.key',
    task_id BIGINT UNSIGNED PATH '$.task')) s
WHERE w.steps IS NOT NULL;
UPDATE workflows w SET w.updated_at = w.updated_at, w.open_steps = (
    SELECT COUNT(*) FROM workflow_steps ws JOIN tasks t ON t.id = ws.task_id
    WHERE ws.workflow_id = w.id AND t.status NOT IN ('SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELLED'))
WHERE w.steps IS NOT NULL;
ALTER TABLE workflows DROP COLUMN steps;
