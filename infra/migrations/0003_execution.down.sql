DROP TABLE IF EXISTS dead_letters;
ALTER TABLE tasks DROP COLUMN started_at;
