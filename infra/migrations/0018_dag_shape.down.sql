ALTER TABLE workflows DROP COLUMN compensations;
ALTER TABLE tasks DROP COLUMN dag_parents, DROP COLUMN dag_children;
