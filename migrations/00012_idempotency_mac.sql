-- +goose Up
-- mac is the HMAC-SHA256 of a stored answer with a key kept outside the
-- database (the deployment's audit key): a replay whose mac does not match
-- is refused, so an answer forged in the table is never served.
ALTER TABLE idempotency_keys ADD COLUMN mac bytea;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN mac;
