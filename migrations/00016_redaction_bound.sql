-- +goose Up
-- The redaction functions do only what a redaction does: they take the
-- redaction (which must exist) and derive everything else from it, the
-- version, the spans and the marker, so the server's login cannot use
-- them to write text of its own into a packet or to empty a version
-- without a redaction. A packet's redaction also replaces its stored hash
-- (the hash of the text that held the secret would confirm a guess) and its
-- chain entry's body, keeping the entry's hashes; the service then appends
-- a packet_redaction entry with the new text's hash.
DROP FUNCTION contextd_redact_packet(text, text, integer[], text);
DROP FUNCTION contextd_redact_version(text, text, integer, bytea);

-- +goose StatementBegin
CREATE FUNCTION contextd_redact_version(p_project text, p_redaction text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    d redactions;
BEGIN
    SELECT * INTO STRICT d FROM redactions WHERE project = p_project AND id = p_redaction;
    PERFORM set_config('contextd.redacting', 'on', true);
    UPDATE item_versions SET content = '[redacted]', content_sha256 = '\x0000000000000000000000000000000000000000000000000000000000000000'
    WHERE project = d.project AND key = d.key AND version = d.version AND NOT deleted;
    UPDATE audit_entries SET body = convert_to('{"entry":"item_version","redacted":' || to_json(d.id)::text
                                               || ',"subject":' || to_json(d.key || '@' || d.version)::text || '}', 'UTF8')
    WHERE chain = d.project AND kind = 'item_version' AND subject = d.key || '@' || d.version;
    PERFORM set_config('contextd.redacting', 'off', true);
END;
$$;
-- +goose StatementEnd

-- contextd_redact_packet overwrites, in packet p_id of p_project, the
-- spans of the version redaction p_redaction (of p_redaction_project)
-- removed, each with "[redacted <id>]" cut or padded with '-' to the
-- span's byte length, and returns the new text's SHA-256.
-- +goose StatementBegin
CREATE FUNCTION contextd_redact_packet(p_project text, p_id text, p_redaction_project text, p_redaction text) RETURNS bytea
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    d redactions;
    b bytea;
    n integer;
    m bytea;
    sp record;
    h bytea;
BEGIN
    SELECT * INTO STRICT d FROM redactions WHERE project = p_redaction_project AND id = p_redaction;
    SELECT convert_to(rendered, 'UTF8') INTO STRICT b FROM packets WHERE project = p_project AND id = p_id;
    FOR sp IN SELECT span_start, span_end FROM packet_records
              WHERE project = p_project AND packet_id = p_id AND subject_kind = 'item' AND decision = 'included'
                AND subject_project = d.project AND subject_key = d.key AND subject_version = d.version
                AND span_start IS NOT NULL
              ORDER BY ord LOOP
        n := sp.span_end - sp.span_start;
        m := substring(convert_to('[redacted ' || d.id || ']' || repeat('-', greatest(n, 0)), 'UTF8') FROM 1 FOR n);
        b := overlay(b PLACING m FROM sp.span_start + 1 FOR n);
    END LOOP;
    h := sha256(b);
    PERFORM set_config('contextd.redacting', 'on', true);
    UPDATE packets SET rendered = convert_from(b, 'UTF8'), rendered_sha256 = h WHERE project = p_project AND id = p_id;
    UPDATE audit_entries SET body = convert_to('{"entry":"packet","redacted":' || to_json(d.id)::text
                                               || ',"subject":' || to_json(p_id)::text || '}', 'UTF8')
    WHERE chain = p_project AND kind = 'packet' AND subject = p_id;
    PERFORM set_config('contextd.redacting', 'off', true);
    RETURN h;
END;
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION contextd_redact_version(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION contextd_redact_packet(text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION contextd_redact_version(text, text) TO contextd_app;
GRANT EXECUTE ON FUNCTION contextd_redact_packet(text, text, text, text) TO contextd_app;

-- +goose Down
DROP FUNCTION contextd_redact_packet(text, text, text, text);
DROP FUNCTION contextd_redact_version(text, text);
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
-- +goose StatementBegin
CREATE FUNCTION contextd_redact_packet(p_project text, p_id text, p_spans integer[], p_marker text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    RAISE EXCEPTION 'contextd_redact_packet: roll back to 00016 or later';
END;
$$;
-- +goose StatementEnd
