-- Back to the outbox for every event. History rows written since 0007 and
-- not relayed yet (id > event_relay.last_id) lose their events: stop the
-- writers and let the relay drain before migrating down.
DROP TABLE event_relay;
ALTER TABLE task_history
    DROP COLUMN task_type,
    DROP COLUMN priority,
    DROP COLUMN next_run_time,
    DROP COLUMN rejected,
    DROP COLUMN route;
