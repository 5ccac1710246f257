-- +goose Up

-- ui_sessions are the signed-in sessions of the provenance explorer (/ui):
-- a person signs in with an agent key and gets a random session token in a
-- cookie. Only the token's SHA-256 is stored, so a reader of this table
-- cannot take a session over; the agent is read again on every request, so
-- revoking its key ends its sessions at once in every process. A session
-- ends after 12 hours idle or 7 days (the server checks both, and sweeps
-- expired rows). Sessions are not history: they are deleted, not audited.
CREATE TABLE ui_sessions (
    token_sha256 bytea       PRIMARY KEY CHECK (length(token_sha256) = 32),
    agent_id     text        NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    CHECK (last_seen_at >= created_at)
);
CREATE INDEX ui_sessions_agent_idx ON ui_sessions (agent_id);
CREATE INDEX ui_sessions_last_seen_idx ON ui_sessions (last_seen_at);

-- The server (contextd_app, 00013) makes, touches and ends sessions.
GRANT SELECT, INSERT, DELETE ON ui_sessions TO contextd_app;
GRANT UPDATE (last_seen_at) ON ui_sessions TO contextd_app;

-- +goose Down
REVOKE ALL ON ui_sessions FROM contextd_app;
DROP TABLE ui_sessions;
