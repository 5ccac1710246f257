-- +goose Up

-- An item's row carries every column of its current version that packet
-- assembly judges by (issue 34): the narrow row of queries/bounded.sql.
-- Until now each lane's page, each relevance winner and each shadow was an
-- index probe of items and then one of item_versions for the same row:
-- ~200 rows of two probes each per packet. Read from the item row alone a
-- page of 64 always-on items took 0.16 ms instead of 0.37 ms (pgbench,
-- prepared, the bench corpus), a lookup of 43 keys 0.21 ms instead of
-- 0.36 ms. Only the text (BoundedTexts) is still read from the version.
--
-- A trigger copies them from the version whenever a row is written or
-- moves to a version (one probe of the version's primary key), not the
-- write path: a server of the release before this one, still running
-- while this one migrates (a rolling upgrade), writes item rows without
-- them, and its rows must be right too. The server's login has no grant to
-- write them, and a write of any of them goes through the trigger too: a
-- packet source's text cache is keyed by a version and its content hash,
-- and a redaction zeroes the version's hash; a login free to write the
-- row's copy could set a redacted version's old hash back, and a process
-- that cached the text before the redaction would put it in new packets.
-- The redaction function (00025's, with one statement added) zeroes the
-- row's copy too, and audit verify compares every copy with its version.
--
-- (IF NOT EXISTS and CREATE OR REPLACE: the migration can run again on a
-- schema that has it, as a restore of goose's table to an older version
-- makes. The backfill only copies what the versions hold.)
ALTER TABLE items
    ADD COLUMN IF NOT EXISTS kind                text        NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS source              text        NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS priority            integer     NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS authority           text        NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS confidence          text        NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS slot                text        NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS template            boolean     NOT NULL DEFAULT false,
    ADD COLUMN IF NOT EXISTS content_sha256      bytea       NOT NULL DEFAULT '\x',
    ADD COLUMN IF NOT EXISTS block_tokens_o200k  integer     NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS block_tokens_cl100k integer     NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS version_created_at  timestamptz NOT NULL DEFAULT '-infinity';

UPDATE items i
SET kind = v.kind, source = v.source, priority = v.priority, authority = v.authority, confidence = v.confidence,
    slot = v.slot, template = v.template, content_sha256 = v.content_sha256,
    block_tokens_o200k = v.block_tokens_o200k, block_tokens_cl100k = v.block_tokens_cl100k,
    version_created_at = v.created_at
FROM item_versions v
WHERE v.project = i.project AND v.key = i.key AND v.version = i.current_version
  AND (i.kind, i.source, i.priority, i.authority, i.confidence, i.slot, i.template, i.content_sha256,
       i.block_tokens_o200k, i.block_tokens_cl100k, i.version_created_at)
      IS DISTINCT FROM
      (v.kind, v.source, v.priority, v.authority, v.confidence, v.slot, v.template, v.content_sha256,
       v.block_tokens_o200k, v.block_tokens_cl100k, v.created_at);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION contextd_items_narrow() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v record;
BEGIN
    -- The narrow columns alone: never the text, which may be large.
    SELECT iv.kind, iv.source, iv.priority, iv.authority, iv.confidence, iv.slot, iv.template, iv.content_sha256,
           iv.block_tokens_o200k, iv.block_tokens_cl100k, iv.created_at
    INTO v FROM public.item_versions iv
    WHERE iv.project = NEW.project AND iv.key = NEW.key AND iv.version = NEW.current_version;
    IF NOT FOUND THEN
        -- No such version (the deferred foreign key refuses the row at
        -- COMMIT): nothing to copy, and no hash to trust.
        NEW.content_sha256 := '\x'::pg_catalog.bytea;
        RETURN NEW;
    END IF;
    NEW.kind := v.kind;
    NEW.source := v.source;
    NEW.priority := v.priority;
    NEW.authority := v.authority;
    NEW.confidence := v.confidence;
    NEW.slot := v.slot;
    NEW.template := v.template;
    NEW.content_sha256 := v.content_sha256;
    NEW.block_tokens_o200k := v.block_tokens_o200k;
    NEW.block_tokens_cl100k := v.block_tokens_cl100k;
    NEW.version_created_at := v.created_at;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
DROP TRIGGER IF EXISTS items_narrow ON items;
CREATE TRIGGER items_narrow
    BEFORE INSERT OR UPDATE OF current_version, kind, source, priority, authority, confidence, slot, template,
        content_sha256, block_tokens_o200k, block_tokens_cl100k, version_created_at ON items
    FOR EACH ROW EXECUTE FUNCTION contextd_items_narrow();

-- The keyword lane probes the GIN index for the stems of a person's words
-- only when the layer has a stem-mode keyword item, which this index of
-- those items alone (most layers have none) answers in one probe
-- (BoundedKeywordRefs).
CREATE INDEX IF NOT EXISTS items_stem_keywords_idx ON items (project)
    WHERE live AND trigger_kind = 'keywords' AND trigger_match = 'stem';

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.contextd_redact_version(p_project pg_catalog.text, p_redaction pg_catalog.text)
RETURNS pg_catalog.void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    d public.redactions;
BEGIN
    SELECT * INTO STRICT d FROM public.redactions WHERE project = p_project AND id = p_redaction;
    PERFORM pg_catalog.set_config('contextd.redacting', 'on', true);
    UPDATE public.item_versions SET content = '[redacted]', content_sha256 = '\x0000000000000000000000000000000000000000000000000000000000000000'
    WHERE project = d.project AND key = d.key AND version = d.version AND NOT deleted;
    UPDATE public.items SET content_sha256 = '\x0000000000000000000000000000000000000000000000000000000000000000'
    WHERE project = d.project AND key = d.key AND current_version = d.version;
    UPDATE public.audit_entries
    SET body = pg_catalog.convert_to('{"entry":"item_version","redacted":' || pg_catalog.to_json(d.id)::pg_catalog.text
                                     || ',"subject":' || pg_catalog.to_json(d.key || '@' || d.version::pg_catalog.text)::pg_catalog.text
                                     || '}', 'UTF8')
    WHERE chain = d.project AND kind = 'item_version' AND subject = d.key || '@' || d.version::pg_catalog.text;
    PERFORM pg_catalog.set_config('contextd.redacting', 'off', true);
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER IF EXISTS items_narrow ON items;
DROP FUNCTION IF EXISTS contextd_items_narrow();
DROP INDEX IF EXISTS items_stem_keywords_idx;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.contextd_redact_version(p_project pg_catalog.text, p_redaction pg_catalog.text)
RETURNS pg_catalog.void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    d public.redactions;
BEGIN
    SELECT * INTO STRICT d FROM public.redactions WHERE project = p_project AND id = p_redaction;
    PERFORM pg_catalog.set_config('contextd.redacting', 'on', true);
    UPDATE public.item_versions SET content = '[redacted]', content_sha256 = '\x0000000000000000000000000000000000000000000000000000000000000000'
    WHERE project = d.project AND key = d.key AND version = d.version AND NOT deleted;
    UPDATE public.audit_entries
    SET body = pg_catalog.convert_to('{"entry":"item_version","redacted":' || pg_catalog.to_json(d.id)::pg_catalog.text
                                     || ',"subject":' || pg_catalog.to_json(d.key || '@' || d.version::pg_catalog.text)::pg_catalog.text
                                     || '}', 'UTF8')
    WHERE chain = d.project AND kind = 'item_version' AND subject = d.key || '@' || d.version::pg_catalog.text;
    PERFORM pg_catalog.set_config('contextd.redacting', 'off', true);
END;
$$;
-- +goose StatementEnd
ALTER TABLE items
    DROP COLUMN IF EXISTS kind, DROP COLUMN IF EXISTS source, DROP COLUMN IF EXISTS priority,
    DROP COLUMN IF EXISTS authority, DROP COLUMN IF EXISTS confidence, DROP COLUMN IF EXISTS slot,
    DROP COLUMN IF EXISTS template, DROP COLUMN IF EXISTS content_sha256, DROP COLUMN IF EXISTS block_tokens_o200k,
    DROP COLUMN IF EXISTS block_tokens_cl100k, DROP COLUMN IF EXISTS version_created_at;
