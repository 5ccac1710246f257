-- +goose Up

-- A withdrawn handoff has a status of its own (issue 35). Until now a
-- withdrawal was stored as superseded with a reason and no successor, and
-- history, events and the stream called it superseded. From now on a
-- withdrawal is withdrawn, in the row and in its event; a handoff replaced
-- by a newer one of its task stays superseded.
--
-- The handoffs withdrawn before this migration keep what they were stored
-- as (superseded, no superseded_by, the reason given): every row and event
-- is covered by the project's audit chain, whose verification recomputes
-- each body from the row, the events are append-only, and a terminal
-- status never changes. Rewriting them would break the chain the
-- deployment has already checkpointed. Readers that need to tell them apart
-- still can: superseded with no superseded_by was a withdrawal.
ALTER TABLE handoffs DROP CONSTRAINT IF EXISTS handoffs_status_check;
ALTER TABLE handoffs ADD CONSTRAINT handoffs_status_check
    CHECK (status IN ('pending', 'accepted', 'rejected', 'superseded', 'withdrawn'));
-- A withdrawal says why and has no successor. (Each constraint is dropped
-- if it exists before it is added: the migration can run again on a schema
-- that has it, as a restore of goose's table to an older version makes.)
ALTER TABLE handoffs DROP CONSTRAINT IF EXISTS handoffs_withdrawn_check;
ALTER TABLE handoffs ADD CONSTRAINT handoffs_withdrawn_check
    CHECK (status <> 'withdrawn' OR (status_reason <> '' AND superseded_by IS NULL));

ALTER TABLE handoff_events DROP CONSTRAINT IF EXISTS handoff_events_event_check;
ALTER TABLE handoff_events ADD CONSTRAINT handoff_events_event_check
    CHECK (event IN ('created', 'accepted', 'rejected', 'superseded', 'withdrawn'));
ALTER TABLE handoff_events DROP CONSTRAINT IF EXISTS handoff_events_check;
ALTER TABLE handoff_events ADD CONSTRAINT handoff_events_check
    CHECK ((event = 'created' AND from_status IS NULL AND to_status = 'pending')
        OR (from_status = 'pending' AND event = to_status AND to_status IN ('accepted', 'rejected', 'superseded', 'withdrawn')));

-- +goose Down
-- Fails while a withdrawn handoff exists: its row and event are history,
-- which no migration rewrites.
ALTER TABLE handoff_events DROP CONSTRAINT handoff_events_check;
ALTER TABLE handoff_events ADD CONSTRAINT handoff_events_check
    CHECK ((event = 'created' AND from_status IS NULL AND to_status = 'pending')
        OR (from_status = 'pending' AND event = to_status AND to_status IN ('accepted', 'rejected', 'superseded')));
ALTER TABLE handoff_events DROP CONSTRAINT handoff_events_event_check;
ALTER TABLE handoff_events ADD CONSTRAINT handoff_events_event_check
    CHECK (event IN ('created', 'accepted', 'rejected', 'superseded'));
ALTER TABLE handoffs DROP CONSTRAINT handoffs_withdrawn_check;
ALTER TABLE handoffs DROP CONSTRAINT handoffs_status_check;
ALTER TABLE handoffs ADD CONSTRAINT handoffs_status_check
    CHECK (status IN ('pending', 'accepted', 'rejected', 'superseded'));
