-- The shape of a DAG task, recorded when it is created, so that its final
-- transfer skips the look-ups its shape makes pointless:
--   dag_children 0: no task depends on it (yet); the transfer that ends it
--                   does not look for children. A task created later with
--                   it as a parent sets 1 under its row lock, so an ending
--                   and a new child never miss each other.
--   dag_parents  1: exactly one parent, fixed at creation; its parent's
--                   final transfer settles it from that one edge instead of
--                   reading all of the child's edges.
--   compensations (workflows): how many compensation tasks the workflow
--                   has; 0 spares its end the search for compensations to
--                   cancel.
-- NULL is unknown (rows written before this migration, compensations, whose
-- edges are added when they start): everything is looked up, as before.
-- Nullable columns added at the end, which MariaDB adds in place.
ALTER TABLE tasks
    ADD COLUMN dag_children TINYINT NULL COMMENT '0: no children; 1: some; NULL: unknown',
    ADD COLUMN dag_parents SMALLINT NULL COMMENT 'parents, fixed at creation; NULL: unknown';
ALTER TABLE workflows
    ADD COLUMN compensations INT NULL COMMENT 'compensation tasks; NULL: unknown';
