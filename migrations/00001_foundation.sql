-- +goose Up

-- btree_gin lets a GIN index lead with the project, so full-text and
-- keyword lookups stay inside one tenant (a trusted extension: a database
-- owner may create it).
CREATE EXTENSION IF NOT EXISTS btree_gin;

-- Projects are tenants. `_shared` is the reserved project of shared defaults:
-- every agent may read it, only admins write it.
CREATE TABLE projects (
    project     text        PRIMARY KEY CHECK (project ~ '^(_shared|[A-Za-z0-9][A-Za-z0-9._-]{0,99})$'),
    description text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

INSERT INTO projects (project, description) VALUES ('_shared', 'Shared defaults, readable by every agent.');

-- Agents hold API keys. Only the SHA-256 of a key is kept; `projects` is the
-- scope ('*' means every project).
CREATE TABLE agents (
    id          text        PRIMARY KEY CHECK (id LIKE 'agt\_%'),
    name        text        NOT NULL CHECK (name <> ''),
    role        text        NOT NULL CHECK (role <> ''),
    permission  text        NOT NULL CHECK (permission IN ('read-only', 'edit', 'admin')),
    projects    text[]      NOT NULL,
    key_sha256  bytea       NOT NULL UNIQUE CHECK (length(key_sha256) = 32),
    created_at  timestamptz NOT NULL DEFAULT now(),
    created_by  text,
    revoked_at  timestamptz
);

-- items is the one mutable row per (project, key): it points at the current
-- version and serialises writers of the key (they lock it FOR UPDATE), so two
-- concurrent writes become versions n+1 and n+2 instead of a conflict. It
-- also carries the current version's trigger, denormalised, so that packet
-- assembly finds its plausible candidates through indexes (always-on items,
-- tool items, keyword items by their first words) instead of scanning.
CREATE TABLE items (
    project         text        NOT NULL REFERENCES projects (project),
    key             text        NOT NULL CHECK (key ~ '^[A-Za-z0-9._:-]{1,200}$'),
    current_version integer     NOT NULL DEFAULT 0 CHECK (current_version >= 0),
    live            boolean     NOT NULL DEFAULT false, -- current version exists and is not a tombstone
    trigger_kind    text        NOT NULL DEFAULT '',    -- always, keywords, tool, pinned_only, relevance
    trigger_tool    text,
    trigger_words   text[]      NOT NULL DEFAULT '{}',  -- first word of each keyword, lower case
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, key)
);

CREATE INDEX items_trigger_kind_idx ON items (project, trigger_kind) WHERE live;
CREATE INDEX items_trigger_tool_idx ON items (project, trigger_tool) WHERE live AND trigger_tool IS NOT NULL;
CREATE INDEX items_trigger_words_idx ON items USING gin (project, trigger_words) WHERE live AND trigger_kind = 'keywords';

-- item_versions is append-only (see the trigger below). A tombstone is a
-- version with deleted = true; it keeps the roles of the version before it so
-- that the item's history stays hidden from those it was hidden from.
CREATE TABLE item_versions (
    project          text        NOT NULL,
    key              text        NOT NULL,
    version          integer     NOT NULL CHECK (version >= 1),
    deleted          boolean     NOT NULL DEFAULT false,
    kind             text        NOT NULL CHECK (kind IN ('knowledge', 'state', 'episode', 'skill', 'decision', 'instruction', 'evidence', 'tool')),
    source           text        NOT NULL CHECK (source <> ''),
    title            text        NOT NULL DEFAULT '',
    summary          text        NOT NULL DEFAULT '',
    content          text        NOT NULL,
    priority         integer     NOT NULL DEFAULT 0,
    authority        text        NOT NULL CHECK (authority IN ('policy', 'instruction', 'evidence', 'hypothesis')),
    confidence       text        NOT NULL CHECK (confidence IN ('verified', 'probable', 'uncertain')),
    state_key        text        NOT NULL DEFAULT '',
    valid_from       timestamptz,
    valid_until      timestamptz,
    slot             text        NOT NULL CHECK (slot IN ('system', 'messages', 'tools')),
    trigger          jsonb       NOT NULL,
    visible_to       text[]      NOT NULL DEFAULT '{}',
    hidden_from      text[]      NOT NULL DEFAULT '{}',
    template         boolean     NOT NULL DEFAULT false,
    metadata         jsonb       NOT NULL DEFAULT '{}',
    provenance       jsonb       NOT NULL DEFAULT '{}',
    -- fields_sha256 is the hash of every client-supplied field in canonical
    -- form; a write whose hash equals the current version's changes nothing.
    fields_sha256    bytea       NOT NULL CHECK (length(fields_sha256) = 32),
    content_sha256   bytea       NOT NULL CHECK (length(content_sha256) = 32),
    tokens_o200k     integer     NOT NULL CHECK (tokens_o200k >= 0),
    tokens_cl100k    integer     NOT NULL CHECK (tokens_cl100k >= 0),
    -- block_tokens_* count the version's markdown block ("- title: content",
    -- continuation lines indented), so that assembly adds up stored counts
    -- instead of tokenizing every candidate.
    block_tokens_o200k  integer  NOT NULL DEFAULT 0 CHECK (block_tokens_o200k >= 0),
    block_tokens_cl100k integer  NOT NULL DEFAULT 0 CHECK (block_tokens_cl100k >= 0),
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    created_by       text        NOT NULL,
    -- xact_id is the writing transaction (pg_current_xact_id()), kept as a
    -- bigint so that a packet can later replay against exactly the versions
    -- its read snapshot saw (pg_visible_in_snapshot(xact_id::text::xid8, s)).
    xact_id          bigint      NOT NULL DEFAULT (pg_current_xact_id()::text::bigint),
    search           tsvector    GENERATED ALWAYS AS (
                         to_tsvector('english', title || ' ' || summary || ' ' || content)
                     ) STORED,
    PRIMARY KEY (project, key, version),
    FOREIGN KEY (project, key) REFERENCES items (project, key),
    CHECK (deleted OR content <> ''),
    CHECK (valid_until IS NULL OR valid_from IS NULL OR valid_from < valid_until)
);

-- item_version_rows is item_versions without its search vector: what every
-- read returns, so rows stay narrow. A plain view inlines, so indexes apply.
CREATE VIEW item_version_rows AS
SELECT project, key, version, deleted, kind, source, title, summary, content,
       priority, authority, confidence, state_key, valid_from, valid_until, slot,
       trigger, visible_to, hidden_from, template, metadata, provenance,
       fields_sha256, content_sha256, tokens_o200k, tokens_cl100k,
       block_tokens_o200k, block_tokens_cl100k,
       created_at, created_by, xact_id
FROM item_versions;

CREATE INDEX item_versions_created_idx ON item_versions (project, key, created_at);
CREATE INDEX item_versions_search_idx ON item_versions USING gin (project, search);
-- Relevance-triggered items get an index of their own, so that ranking a
-- query's matches touches only them (ts_rank_cd must read every match).
CREATE INDEX item_versions_relevance_idx ON item_versions USING gin (project, search)
    WHERE trigger @> '{"relevance": true}';

-- contextd_refuse_change makes a table append-only whatever the client does.
-- +goose StatementBegin
CREATE FUNCTION contextd_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER item_versions_append_only
    BEFORE UPDATE OR DELETE ON item_versions
    FOR EACH ROW EXECUTE FUNCTION contextd_refuse_change();
CREATE TRIGGER item_versions_no_truncate
    BEFORE TRUNCATE ON item_versions
    FOR EACH STATEMENT EXECUTE FUNCTION contextd_refuse_change();

-- idempotency_keys remembers the answer to a POST or PUT sent with an
-- Idempotency-Key, per agent, for 24 hours. It is written in the same
-- transaction as the request's own writes, so a replay and the write it
-- stands for are never out of step.
CREATE TABLE idempotency_keys (
    agent_id        text        NOT NULL REFERENCES agents (id),
    key             text        NOT NULL CHECK (key <> '' AND length(key) <= 255),
    request_sha256  bytea       NOT NULL,
    status          integer     NOT NULL,
    content_type    text        NOT NULL DEFAULT '',
    headers         jsonb       NOT NULL DEFAULT '{}',
    body            bytea       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, key)
);

CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);

-- +goose Down
DROP TABLE idempotency_keys;
DROP VIEW item_version_rows;
DROP TABLE item_versions;
DROP FUNCTION contextd_refuse_change();
DROP TABLE items;
DROP TABLE agents;
DROP TABLE projects;
