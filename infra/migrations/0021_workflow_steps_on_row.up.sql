-- The steps of a workflow without compensations, listed on the workflow's
-- row instead of in workflow_steps: a JSON array, in position order, of
-- {"key": step key, "task": task ID}. Creating such a workflow writes one
-- row instead of one plus a row per step (with its three index entries),
-- and nothing ever updates the list: a step's end is read from its task
-- (tasks.workflow_id and workflow_role place it, migration 0019), and its
-- final state is recorded nowhere else, since only compensations, which
-- these workflows do not have, are chosen by it. The steps of such a
-- workflow have workflow_role bit 16. NULL: the steps are in
-- workflow_steps, as for every workflow created before this migration, by
-- a build before it, or with compensations.
-- A nullable column added at the end, which MariaDB adds in place.
ALTER TABLE workflows
    ADD COLUMN steps MEDIUMTEXT NULL COMMENT 'JSON [{key, task}] of a workflow without compensations; NULL: in workflow_steps';
