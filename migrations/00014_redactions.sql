-- +goose Up
-- A redaction removes a leaked secret from an item version, from the
-- spans of every packet that included it and from the idempotency answers
-- that hold it, keeping the proof: the chain's entry hashes stay, the
-- version's entry body is replaced by one that names the redaction, and a
-- redaction entry says who, when and why.
CREATE TABLE redactions (
    project       text        NOT NULL REFERENCES projects (project),
    id            text        NOT NULL CHECK (id LIKE 'red\_%'),
    key           text        NOT NULL,
    version       integer     NOT NULL,
    reason        text        NOT NULL CHECK (reason <> '' AND length(reason) <= 2000),
    created_by    text        NOT NULL,
    created_at    timestamptz NOT NULL,
    status        text        NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'done', 'failed')),
    packets_total integer     NOT NULL DEFAULT 0,
    packets_done  integer     NOT NULL DEFAULT 0,
    error         text        NOT NULL DEFAULT '',
    PRIMARY KEY (project, id),
    UNIQUE (project, key, version)
);
GRANT SELECT, INSERT ON redactions TO contextd_app;
GRANT UPDATE (status, packets_total, packets_done, error) ON redactions TO contextd_app;

-- The refusal lets through the one path allowed to change append-only
-- rows: the redaction functions below, which run as the owner (the server's
-- login has no UPDATE on those tables at all) and say so for their own
-- statements only.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION contextd_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND current_setting('contextd.redacting', true) = 'on' THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$;
-- +goose StatementEnd

-- contextd_redact_version replaces a version's content by "[redacted]" (its hash 32
-- zero bytes: a guessed secret cannot be confirmed) and replaces its chain
-- entry's body by p_body, keeping the entry's hashes.
-- +goose StatementBegin
CREATE FUNCTION contextd_redact_version(p_project text, p_key text, p_version integer, p_body bytea) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    PERFORM set_config('contextd.redacting', 'on', true);
    UPDATE item_versions SET content = '[redacted]', content_sha256 = '\x0000000000000000000000000000000000000000000000000000000000000000'
    WHERE project = p_project AND key = p_key AND version = p_version;
    UPDATE audit_entries SET body = p_body
    WHERE chain = p_project AND kind = 'item_version' AND subject = p_key || '@' || p_version;
    PERFORM set_config('contextd.redacting', 'off', true);
END;
$$;
-- +goose StatementEnd

-- contextd_redact_packet overwrites the bytes [start, end) of a packet's
-- rendered text, for each pair of p_spans, with p_marker's bytes cut or
-- padded with '-' to the same length: every span of every record stays
-- valid.
-- +goose StatementBegin
CREATE FUNCTION contextd_redact_packet(p_project text, p_id text, p_spans integer[], p_marker text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    b bytea;
    n integer;
    m bytea;
BEGIN
    SELECT convert_to(rendered, 'UTF8') INTO b FROM packets WHERE project = p_project AND id = p_id;
    IF b IS NULL THEN
        RETURN;
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_spans, 1), 0) / 2 LOOP
        n := p_spans[2 * i] - p_spans[2 * i - 1];
        m := substring(convert_to(p_marker || repeat('-', greatest(n, 0)), 'UTF8') FROM 1 FOR n);
        b := overlay(b PLACING m FROM p_spans[2 * i - 1] + 1 FOR n);
    END LOOP;
    PERFORM set_config('contextd.redacting', 'on', true);
    UPDATE packets SET rendered = convert_from(b, 'UTF8') WHERE project = p_project AND id = p_id;
    PERFORM set_config('contextd.redacting', 'off', true);
END;
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION contextd_redact_version(text, text, integer, bytea) FROM PUBLIC;
REVOKE ALL ON FUNCTION contextd_redact_packet(text, text, integer[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION contextd_redact_version(text, text, integer, bytea) TO contextd_app;
GRANT EXECUTE ON FUNCTION contextd_redact_packet(text, text, integer[], text) TO contextd_app;

-- +goose Down
DROP FUNCTION contextd_redact_packet(text, text, integer[], text);
DROP FUNCTION contextd_redact_version(text, text, integer, bytea);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION contextd_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$;
-- +goose StatementEnd
DROP TABLE redactions;
