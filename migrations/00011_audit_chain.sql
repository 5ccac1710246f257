-- +goose Up
-- The audit chain: per project, an append-only hash chain over what
-- changes it (internal/audit documents the entries and their encoding).
-- chain is the project, or '' for the global chain of agents and keys.
-- body is the entry's canonical encoding, written by the service; the
-- entry hash is SHA-256(body) and chain_hash = SHA-256(previous
-- chain_hash || entry hash), the first entry's previous hash 32 zero bytes.
-- Verification recomputes every hash from the bodies and compares each
-- body with the row it covers, as that row is now.
CREATE TABLE audit_entries (
    chain      text   NOT NULL,
    seq        bigint NOT NULL CHECK (seq >= 1),
    kind       text   NOT NULL,
    subject    text   NOT NULL,
    body       bytea  NOT NULL,
    entry_hash bytea  NOT NULL CHECK (length(entry_hash) = 32),
    chain_hash bytea  NOT NULL CHECK (length(chain_hash) = 32),
    PRIMARY KEY (chain, seq)
) WITH (autovacuum_vacuum_insert_scale_factor = 0.05);
-- what covers one subject: an item's versions, in order
CREATE INDEX audit_entries_subject_idx ON audit_entries (chain, kind, subject COLLATE "C", seq);

CREATE TRIGGER audit_entries_append_only BEFORE UPDATE OR DELETE ON audit_entries
    FOR EACH ROW EXECUTE FUNCTION contextd_refuse_change();
CREATE TRIGGER audit_entries_no_truncate BEFORE TRUNCATE ON audit_entries
    FOR EACH STATEMENT EXECUTE FUNCTION contextd_refuse_change();

-- The head of each chain: its last seq and chain hash. The writing
-- transaction locks its chain's row (contextd_audit_append, sent with
-- COMMIT), so the seqs of a chain are gapless and in commit order.
CREATE TABLE audit_heads (
    chain text   PRIMARY KEY,
    seq   bigint NOT NULL,
    hash  bytea  NOT NULL CHECK (length(hash) = 32)
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01);

-- contextd_audit_append appends entries to a chain under its head's lock
-- and returns the new head's seq.
-- +goose StatementBegin
CREATE FUNCTION contextd_audit_append(p_chain text, p_kinds text[], p_subjects text[], p_bodies bytea[])
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    s  bigint;
    h  bytea;
    e  bytea;
    hs bytea[] := '{}';
    es bytea[] := '{}';
    n  integer := coalesce(array_length(p_bodies, 1), 0);
BEGIN
    INSERT INTO audit_heads AS a (chain, seq, hash) VALUES (p_chain, 0, '\x0000000000000000000000000000000000000000000000000000000000000000')
    ON CONFLICT (chain) DO UPDATE SET seq = a.seq
    RETURNING a.seq, a.hash INTO s, h;
    FOR i IN 1 .. n LOOP
        e := sha256(p_bodies[i]);
        h := sha256(h || e);
        es := es || e;
        hs := hs || h;
    END LOOP;
    INSERT INTO audit_entries (chain, seq, kind, subject, body, entry_hash, chain_hash)
    SELECT p_chain, s + o, p_kinds[o], p_subjects[o], p_bodies[o], es[o], hs[o]
    FROM generate_series(1, n) AS o;
    UPDATE audit_heads SET seq = s + n, hash = h WHERE chain = p_chain;
    RETURN s + n;
END;
$$;
-- +goose StatementEnd

-- The chain's head is the project's head now: every write of a project
-- adds an entry.
ALTER TABLE project_counters DROP COLUMN write_seq;

-- +goose Down
ALTER TABLE project_counters ADD COLUMN write_seq bigint NOT NULL DEFAULT 0;
DROP FUNCTION contextd_audit_append(text, text[], text[], bytea[]);
DROP TABLE audit_heads;
DROP TABLE audit_entries;
