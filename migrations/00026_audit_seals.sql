-- +goose Up
-- Seals: the audit key's signature over each transaction's entries, so that
-- whoever can write the database but does not hold the key (a superuser,
-- the server's own login) cannot add or rewrite an entry that verification
-- accepts. The chain's hashes alone can be recomputed by anyone.
--
-- A seal sits at the last entry a transaction appended to a chain (seq) and
-- covers its entries from first_seq: the Ed25519 signature, by the
-- deployment's audit key, of audit.SealMessage(kind, chain, first_seq, seq,
-- chain hash at seq). Verification requires the seals of a chain to tile
-- it: each starts right after the one before, and the last ends at the
-- head; so an entry slipped between two transactions has no seal, and one
-- changed anywhere changes every chain hash after it. kind 'write' is a
-- transaction's seal; kind 'start' adopts, once, the entries a chain had
-- before it was sealed (written by the process that applied this migration
-- and holds the key, or by `contextd audit adopt`), and may only be a
-- chain's first seal.
--
-- The server's login may add seals and read them; nothing may change or
-- remove one.
CREATE TABLE audit_seals (
    chain     text   NOT NULL,
    seq       bigint NOT NULL CHECK (seq >= 1),
    first_seq bigint NOT NULL CHECK (first_seq >= 1 AND first_seq <= seq),
    kind      text   NOT NULL CHECK (kind IN ('write', 'start')),
    signature bytea  NOT NULL CHECK (length(signature) = 64),
    PRIMARY KEY (chain, seq)
);
CREATE TRIGGER audit_seals_append_only BEFORE UPDATE OR DELETE ON audit_seals
    FOR EACH ROW EXECUTE FUNCTION contextd_refuse_change();
CREATE TRIGGER audit_seals_no_truncate BEFORE TRUNCATE ON audit_seals
    FOR EACH STATEMENT EXECUTE FUNCTION contextd_refuse_change();
GRANT SELECT, INSERT ON audit_seals TO contextd_app;

-- +goose Down
DROP TABLE audit_seals;
