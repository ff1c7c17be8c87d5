-- Back to relays that each read and advance the cursor on every pass.
ALTER TABLE event_relay
    DROP COLUMN holder,
    DROP COLUMN lease_until,
    DROP COLUMN lease_seq;
