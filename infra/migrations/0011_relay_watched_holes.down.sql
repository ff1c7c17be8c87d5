-- Back to holes watched only in the holder's memory: a late row in a hole
-- the previous holder passed is not published after a lease hand-over.
ALTER TABLE event_relay DROP COLUMN watched;
