-- +goose Up
-- Definer functions that cannot be hijacked (issue 32).
--
-- The redaction functions run as their owner (the migrating role, often a
-- superuser) for the server's login, a member of contextd_app. They pinned
-- search_path = public, and a path without pg_temp still searches the
-- session's temporary schema, first, for relations and types: the login
-- could create a temporary view named redactions calling a pg_temp
-- function, or a temporary table item_versions with a trigger, or a domain
-- pg_temp.bytea with a CHECK, call a redaction function, and have its
-- code run as the owner (or redact a version of its choice, from a
-- temporary redactions row). Now:
--
-- * Every SECURITY DEFINER function pins search_path = pg_catalog, public,
--   pg_temp (pg_temp last, as PostgreSQL's documentation of SECURITY
--   DEFINER asks), and names every table, type and function it uses with
--   its schema (public.redactions, pg_catalog.set_config, ...). The SQL
--   forms substring(x FROM a FOR b), overlay(x PLACING ...), greatest() and
--   the keyword type integer are pg_catalog's by the grammar. Operators
--   (=, ||, +, -) are looked up along the path, pg_catalog first, and never
--   in pg_temp; every one used has an exact pg_catalog match (an integer
--   joined to text is cast to text first, the same text textanycat made),
--   and no role but the owners may create anything in public (below).
--   internal/store/definer_test.go attacks every definer function with
--   temporary tables, views, domains and functions of every name it could
--   reach, and fails for a definer function it does not know.
--
-- * The functions a definer function's statements fire run as the owner
--   too: contextd_refuse_change, the BEFORE UPDATE trigger of
--   item_versions, audit_entries and packets, lets the redaction through.
--   Inside a definer function they already inherit its pinned path, and
--   the login's own calls of any function run as the login (a shadow in its
--   own pg_temp gains it nothing); still, contextd_refuse_change and every
--   other plpgsql function get the pinned path of their own, so that a
--   future definer function (or an owner's session) that fires them cannot
--   make them read a shadow. They are never inlined, and run once per
--   statement or per row of rare writes (handoff and agent changes, a
--   write's audit append and relevance-row delete, text over 256 KB): a
--   SET clause costs them 0.5 to 3.5 µs a call (measured: 100,000 calls of
--   a plpgsql function, 0.8 µs each without, 4.1 µs with; with a query in
--   it, 7.5 µs and 8.0 µs). A trigger function added later pins it too:
--   the test fails for a trigger of a table of public that does not.
--
-- * The three SQL functions are left alone: a SET clause stops PostgreSQL
--   inlining an SQL function and wraps every call in a GUC save and
--   restore. Measured on PostgreSQL 15: contextd_term_weights, inlined
--   into the write path's relevance rows, went from 107 ms to 312 ms over
--   20,000 vectors; contextd_search_vector, inlined into search, replay
--   and the write path, from 642 ms to 871 ms over 20,000 items;
--   contextd_chain_step, the aggregate step of every audit entry, from 332
--   ms to 400 ms over 100,000 entries. None is reachable from a definer
--   function; their bodies name no table, pg_temp is never searched for a
--   function or operator, and the one type they name ('english'::regconfig
--   in contextd_search_vector) is found in pg_catalog first under a pinned
--   path, the only path under which they could run with rights the caller
--   lacks.
--
-- The rights of contextd_app (migration 00013 lists its grants):
--
-- * CREATE on schema public is revoked from PUBLIC. PostgreSQL 15 no
--   longer grants it, but a database made by an older PostgreSQL, or
--   upgraded from one, still does; with it the login could create in
--   public a function or operator (an exact match such as text || integer
--   beats pg_catalog's polymorphic one wherever it stands in the path) that
--   the definer functions and every other role's session would call. Down
--   keeps it revoked: granting it back would reopen that, and PostgreSQL 15
--   itself never grants it.
--
-- * CREATE on the database is revoked from PUBLIC and contextd_app: never
--   granted by PostgreSQL, but whoever holds it can create a schema named
--   after another role, which that role's default search_path ("$user",
--   public) then searches first. Down keeps this too.
--
-- * TEMPORARY on the database stays. The server makes no temporary table
--   (no query or store statement does), but the right comes to every role
--   through PUBLIC, PostgreSQL's default, so it cannot be taken from
--   contextd_app alone: revoking it from PUBLIC would take it from every
--   role of a database contextd may share with others. And a database's
--   ACL is not copied by CREATE DATABASE ... TEMPLATE, nor by a dump
--   restored into a database made beforehand, so a revocation here would
--   quietly be lost. It is
--   harmless now: a temporary object is seen only by the session that made
--   it, that session's code runs as the login except inside a definer
--   function, and a definer function neither names nor searches pg_temp
--   before pg_catalog and public (for functions and operators, never).
--
-- (Both REVOKEs on objects the migrating role does not own only warn.)

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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.contextd_redact_packet(p_project pg_catalog.text, p_id pg_catalog.text,
                                                         p_redaction_project pg_catalog.text, p_redaction pg_catalog.text)
RETURNS pg_catalog.bytea
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    d public.redactions;
    b pg_catalog.bytea;
    n integer;
    m pg_catalog.bytea;
    sp pg_catalog.record;
    h pg_catalog.bytea;
BEGIN
    SELECT * INTO STRICT d FROM public.redactions WHERE project = p_redaction_project AND id = p_redaction;
    SELECT pg_catalog.convert_to(rendered, 'UTF8') INTO STRICT b FROM public.packets WHERE project = p_project AND id = p_id;
    FOR sp IN SELECT span_start, span_end FROM public.packet_records
              WHERE project = p_project AND packet_id = p_id AND subject_kind = 'item' AND decision = 'included'
                AND subject_project = d.project AND subject_key = d.key AND subject_version = d.version
                AND span_start IS NOT NULL
              ORDER BY ord LOOP
        n := sp.span_end - sp.span_start;
        m := substring(pg_catalog.convert_to('[redacted ' || d.id || ']' || pg_catalog.repeat('-', greatest(n, 0)), 'UTF8') FROM 1 FOR n);
        b := overlay(b PLACING m FROM sp.span_start + 1 FOR n);
    END LOOP;
    h := pg_catalog.sha256(b);
    PERFORM pg_catalog.set_config('contextd.redacting', 'on', true);
    UPDATE public.packets SET rendered = pg_catalog.convert_from(b, 'UTF8'), rendered_sha256 = h WHERE project = p_project AND id = p_id;
    UPDATE public.audit_entries
    SET body = pg_catalog.convert_to('{"entry":"packet","redacted":' || pg_catalog.to_json(d.id)::pg_catalog.text
                                     || ',"subject":' || pg_catalog.to_json(p_id)::pg_catalog.text || '}', 'UTF8')
    WHERE chain = p_project AND kind = 'packet' AND subject = p_id;
    PERFORM pg_catalog.set_config('contextd.redacting', 'off', true);
    RETURN h;
END;
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION public.contextd_redact_version(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION public.contextd_redact_packet(text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.contextd_redact_version(text, text) TO contextd_app;
GRANT EXECUTE ON FUNCTION public.contextd_redact_packet(text, text, text, text) TO contextd_app;

ALTER FUNCTION public.contextd_refuse_change() SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION public.contextd_handoff_transition() SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION public.contextd_handoff_has_event() SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION public.contextd_agents_notify() SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION public.contextd_agents_notify_deleted() SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION public.contextd_audit_append(text, text[], text[], bytea[]) SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION public.contextd_item_terms_delete(text, text[]) SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION public.contextd_search_vector_long(text) SET search_path = pg_catalog, public, pg_temp;

REVOKE CREATE ON SCHEMA public FROM PUBLIC, contextd_app;
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE pg_catalog.format('REVOKE CREATE ON DATABASE %I FROM PUBLIC, contextd_app', pg_catalog.current_database());
END
$$;
-- +goose StatementEnd

-- +goose Down
-- The definitions of 00016 and no path of their own for the others; the
-- revocations stay (see above).
ALTER FUNCTION contextd_search_vector_long(text) RESET search_path;
ALTER FUNCTION contextd_item_terms_delete(text, text[]) RESET search_path;
ALTER FUNCTION contextd_audit_append(text, text[], text[], bytea[]) RESET search_path;
ALTER FUNCTION contextd_agents_notify_deleted() RESET search_path;
ALTER FUNCTION contextd_agents_notify() RESET search_path;
ALTER FUNCTION contextd_handoff_has_event() RESET search_path;
ALTER FUNCTION contextd_handoff_transition() RESET search_path;
ALTER FUNCTION contextd_refuse_change() RESET search_path;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION contextd_redact_version(p_project text, p_redaction text) RETURNS void
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION contextd_redact_packet(p_project text, p_id text, p_redaction_project text, p_redaction text) RETURNS bytea
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
