-- Workflows listed by state (GET /v1/workflows?status=FAILED), newest
-- first, read one range of this index in its order instead of walking the
-- whole table for a rare state. A workflow changes state once or twice in
-- its life (RUNNING, then its end), so the entry seldom moves.
ALTER TABLE workflows ADD INDEX idx_workflows_status_id (status, id);
