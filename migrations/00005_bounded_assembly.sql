-- +goose Up

-- Bounded assembly reads always-on candidates in the packet's rank order,
-- straight from an index, and stops when the budget is full. The rank
-- fields of the current version are kept on the item row, each stored so
-- that ascending order is the packet's order (authority, priority and
-- confidence descending, the newer version first), with the key last:
-- (rank_authority, rank_priority, rank_confidence, rank_time, key)
-- ascending is exactly the pipeline's byRank for unpinned items without a
-- relevance score. The item write path (ItemSetCurrentMany) sets them from
-- the version it makes current, with the same expressions as below.
ALTER TABLE items
    ADD COLUMN rank_authority  smallint NOT NULL DEFAULT 0,
    ADD COLUMN rank_priority   bigint   NOT NULL DEFAULT 0,
    ADD COLUMN rank_confidence smallint NOT NULL DEFAULT 0,
    ADD COLUMN rank_time       bigint   NOT NULL DEFAULT 0,
    ADD COLUMN state_key       text     NOT NULL DEFAULT '',
    -- open: the current version is visible to every role at every time (no
    -- roles, no validity window). Open always-on items are counted by a
    -- counter, so that the candidates a budget never tried are counted
    -- without reading them; the others have an index of their own.
    ADD COLUMN open            boolean  NOT NULL DEFAULT false,
    -- The roles and window of the current version, so that the restricted
    -- candidates a budget never tried are counted from an index alone.
    ADD COLUMN visible_to      text[]   NOT NULL DEFAULT '{}',
    ADD COLUMN hidden_from     text[]   NOT NULL DEFAULT '{}',
    ADD COLUMN valid_from      timestamptz,
    ADD COLUMN valid_until     timestamptz,
    -- The keywords of a keyword item, so that the keyword lane is found
    -- and its untried candidates counted from the item rows alone.
    ADD COLUMN trigger_keywords text[] NOT NULL DEFAULT '{}';

UPDATE items i
SET rank_authority  = -(CASE v.authority WHEN 'policy' THEN 4 WHEN 'instruction' THEN 3 WHEN 'evidence' THEN 2 WHEN 'hypothesis' THEN 1 ELSE 0 END),
    rank_priority   = -v.priority::bigint,
    rank_confidence = -(CASE v.confidence WHEN 'verified' THEN 3 WHEN 'probable' THEN 2 WHEN 'uncertain' THEN 1 ELSE 0 END),
    rank_time       = -(extract(epoch FROM v.created_at) * 1000000)::bigint,
    state_key       = v.state_key,
    open            = (cardinality(v.visible_to) = 0 AND cardinality(v.hidden_from) = 0 AND v.valid_from IS NULL AND v.valid_until IS NULL),
    visible_to = v.visible_to, hidden_from = v.hidden_from, valid_from = v.valid_from, valid_until = v.valid_until,
    trigger_keywords = coalesce(ARRAY(SELECT jsonb_array_elements_text(v.trigger -> 'keywords')), '{}')
FROM item_versions v
WHERE v.project = i.project AND v.key = i.key AND v.version = i.current_version;

CREATE INDEX items_always_rank_idx ON items (project, rank_authority, rank_priority, rank_confidence, rank_time, key COLLATE "C")
    WHERE live AND trigger_kind = 'always';
CREATE INDEX items_always_restricted_idx ON items (project, rank_authority, rank_priority, rank_confidence, rank_time, key COLLATE "C")
    INCLUDE (visible_to, hidden_from, valid_from, valid_until)
    WHERE live AND trigger_kind = 'always' AND NOT open;

-- always_open counts a project's live, open, always-on items; the item write
-- path keeps it in step in the same statement that moves the items.
ALTER TABLE project_counters ADD COLUMN always_open bigint NOT NULL DEFAULT 0;
INSERT INTO project_counters (project, always_open)
SELECT project, count(*) FROM items WHERE live AND trigger_kind = 'always' AND open GROUP BY project
ON CONFLICT (project) DO UPDATE SET always_open = EXCLUDED.always_open;
-- The items of one tool, likewise.
CREATE INDEX items_tool_rank_idx ON items (project, trigger_tool, rank_authority, rank_priority, rank_confidence, rank_time, key COLLATE "C")
    WHERE live AND trigger_tool IS NOT NULL;
CREATE INDEX items_tool_restricted_idx ON items (project, trigger_tool, rank_authority, rank_priority, rank_confidence, rank_time, key COLLATE "C")
    INCLUDE (visible_to, hidden_from, valid_from, valid_until)
    WHERE live AND trigger_tool IS NOT NULL AND NOT open;
DROP INDEX items_trigger_tool_idx;

-- tool_counters counts each tool's live, open items, as always_open does
-- for always-on items.
CREATE TABLE tool_counters (
    project text   NOT NULL REFERENCES projects (project),
    tool    text   NOT NULL,
    open    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (project, tool)
);
INSERT INTO tool_counters (project, tool, open)
SELECT project, trigger_tool, count(*) FROM items WHERE live AND trigger_tool IS NOT NULL AND open GROUP BY 1, 2;
-- Keyword items are found by the first words of their keywords, each
-- qualified by its project (project, U+001F, word) so that one GIN index
-- lookup stays inside the tenant: led by the project through btree_gin, a
-- lookup of fifty words took 9 ms at 10,000 items; on qualified words alone
-- it takes 0.3 ms and never reads another project's rows.
ALTER TABLE items ADD COLUMN trigger_terms text[] NOT NULL DEFAULT '{}';
UPDATE items SET trigger_terms = ARRAY(SELECT project || E'\x1f' || w FROM unnest(trigger_words) AS w)
WHERE cardinality(trigger_words) > 0;
DROP INDEX items_trigger_words_idx;
CREATE INDEX items_trigger_terms_idx ON items USING gin (trigger_terms) WHERE live AND trigger_kind = 'keywords';
-- Contradiction groups are found by state key among the live items.
CREATE INDEX items_state_key_idx ON items (project, state_key) WHERE live AND state_key <> '';

-- item_terms is the relevance index of current versions: for each live
-- relevance item, one row per lexeme of its search vector with an integer
-- weight, so that the top items of one lexeme are an index range read
-- instead of ranking every match. weight = 1000·tf / (tf + 1 + ⌊n/64⌋),
-- tf the lexeme's positions in the vector and n its number of lexemes
-- (see queries/bounded.sql and the README's relevance score). It is
-- derived data, rewritten by the item write path for every key it writes.
CREATE TABLE item_terms (
    project text    NOT NULL,
    lexeme  text    NOT NULL,
    weight  integer NOT NULL,
    key     text    NOT NULL,
    version integer NOT NULL,
    -- open: the version has no roles and no validity window (items.open),
    -- so a list needs no look at the version to keep it.
    open    boolean NOT NULL,
    -- by key: the write path rewrites an item's rows; by lexeme: the lists.
    PRIMARY KEY (project, key, lexeme),
    FOREIGN KEY (project, key) REFERENCES items (project, key)
);
CREATE INDEX item_terms_lexeme_idx ON item_terms (project, lexeme COLLATE "C", weight DESC, key COLLATE "C") INCLUDE (open, version);

-- contextd_term_weights is the one definition of a relevance weight, used by
-- the write path, the backfill below and the snapshot reads of replay.
-- +goose StatementBegin
CREATE FUNCTION contextd_term_weights(vec tsvector) RETURNS TABLE (lexeme text, weight integer)
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT u.lexeme,
           (1000 * coalesce(array_length(u.positions, 1), 1))
           / (coalesce(array_length(u.positions, 1), 1) + 1 + length(vec) / 64)
    FROM unnest(vec) AS u
$$;
-- +goose StatementEnd

INSERT INTO item_terms (project, lexeme, weight, key, version, open)
SELECT v.project, t.lexeme, t.weight, v.key, v.version, i.open
FROM items i
JOIN item_versions v ON v.project = i.project AND v.key = i.key AND v.version = i.current_version
CROSS JOIN LATERAL contextd_term_weights(v.search) t
WHERE i.live AND i.trigger_kind = 'relevance';

-- The relevance index of every version is no longer read by assembly.
DROP INDEX item_versions_relevance_idx;

-- A packet remembers the pipeline that made it, so a replay renders with
-- that pipeline's own code; packets made before this migration were made by
-- pipeline 1. budget_cutoff is {"rank","headroom","count"} when the budget
-- stopped trying candidates (null otherwise), and gaps_more counts the
-- budget exclusions not listed in gaps (which holds at most 20).
ALTER TABLE packets
    ADD COLUMN pipeline      smallint NOT NULL DEFAULT 1,
    ADD COLUMN budget_cutoff jsonb,
    ADD COLUMN gaps_more     integer  NOT NULL DEFAULT 0;

-- A packet's record is written in the transaction that writes the packet,
-- by the one store method that writes both, and neither table can change
-- afterwards; the foreign key's check per record cost as much as the rest
-- of writing them.
ALTER TABLE packet_records DROP CONSTRAINT packet_records_project_packet_id_fkey;

-- The rendered text and the request are the bulk of a packet row: lz4
-- compresses them several times faster than pglz. A server built without
-- lz4 keeps pglz, and says so.
-- +goose StatementBegin
DO $$
BEGIN
    ALTER TABLE packets ALTER COLUMN rendered SET COMPRESSION lz4, ALTER COLUMN request SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'lz4 compression is not available (%); packets stay compressed with pglz, slower to write', SQLERRM;
END
$$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE packets ALTER COLUMN rendered SET COMPRESSION default, ALTER COLUMN request SET COMPRESSION default;
ALTER TABLE packet_records ADD FOREIGN KEY (project, packet_id) REFERENCES packets (project, id);
ALTER TABLE packets DROP COLUMN gaps_more, DROP COLUMN budget_cutoff, DROP COLUMN pipeline;
CREATE INDEX item_versions_relevance_idx ON item_versions USING gin (project, search)
    WHERE trigger @> '{"relevance": true}';
DROP TABLE item_terms;
DROP FUNCTION contextd_term_weights(tsvector);
DROP INDEX items_state_key_idx;
DROP INDEX items_trigger_terms_idx;
ALTER TABLE items DROP COLUMN trigger_terms;
CREATE INDEX items_trigger_words_idx ON items USING gin (project, trigger_words) WHERE live AND trigger_kind = 'keywords';
DROP TABLE tool_counters;
DROP INDEX items_tool_restricted_idx;
DROP INDEX items_tool_rank_idx;
CREATE INDEX items_trigger_tool_idx ON items (project, trigger_tool) WHERE live AND trigger_tool IS NOT NULL;
DROP INDEX items_always_restricted_idx;
DROP INDEX items_always_rank_idx;
ALTER TABLE project_counters DROP COLUMN always_open;
ALTER TABLE items DROP COLUMN trigger_keywords, DROP COLUMN valid_until, DROP COLUMN valid_from, DROP COLUMN hidden_from, DROP COLUMN visible_to,
    DROP COLUMN open, DROP COLUMN state_key, DROP COLUMN rank_time, DROP COLUMN rank_confidence,
    DROP COLUMN rank_priority, DROP COLUMN rank_authority;
