-- +goose Up

-- Keyword triggers may match by stems ({"keywords": [...], "match": "stem"}).
-- The item row says how its keywords match, so the keyword lane can tell
-- from the item rows alone which of them fire; a stem-mode item's
-- trigger_words (and so trigger_terms) hold "~" and the stem of each first
-- word instead of the word (keyword.Term), which no word of a message can
-- be. Every item written before this migration matches whole words.
ALTER TABLE items ADD COLUMN trigger_match text NOT NULL DEFAULT 'word'
    CONSTRAINT items_trigger_match_check CHECK (trigger_match IN ('word', 'stem'));
GRANT UPDATE (trigger_match) ON items TO contextd_app;

-- +goose Down
REVOKE UPDATE (trigger_match) ON items FROM contextd_app;
ALTER TABLE items DROP COLUMN trigger_match;
