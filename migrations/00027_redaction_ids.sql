-- +goose Up
-- A redaction's id has one form, the one contextd makes (ident.New("red"):
-- "red_" and 20 base62 characters; audit.ValidRedactionID), because a
-- packet's redaction marker is built from it: "[redacted <id>]" is the only
-- text a redaction writes into a packet, so that text can say nothing. The
-- server's login could insert a row whose id carried an instruction; the
-- CHECK refuses it, and verification refuses a redacted packet whose
-- redaction is not a row with its own entry in the chain.
ALTER TABLE redactions DROP CONSTRAINT IF EXISTS redactions_id_check;
ALTER TABLE redactions ADD CONSTRAINT redactions_id_check CHECK (id ~ '^red_[0-9A-Za-z]{20}$');

-- +goose Down
ALTER TABLE redactions DROP CONSTRAINT redactions_id_check;
ALTER TABLE redactions ADD CONSTRAINT redactions_id_check CHECK (id LIKE 'red\_%');
