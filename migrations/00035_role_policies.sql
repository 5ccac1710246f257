-- +goose Up

-- role_policies: a policy per role (issue 37): what a packet for the role
-- takes when its request does not say, in _shared for every project and
-- in a project for its own packets, the project's row overriding _shared's
-- member by member. A NULL member is one the layer does not set. A row is
-- never deleted (the server's role may not): DELETE of a policy sets every
-- member NULL (a row with no member is no policy), so that the row stays
-- what its last audit entry says. Each change is an entry of the project's audit chain (kind
-- role_policy, subject the role): the row after it, checked against the
-- row as it is now, as the project row is.
--
-- budget_max marks token_budget as a ceiling: a request's own
-- token_budget wins over the policy's only up to it. max_per_section maps
-- a section's name to the most entries it may hold. version counts the
-- row's changes from 1. (IF NOT EXISTS: the migration can run again on a
-- schema that has it, as a restore of goose's table to an older version
-- makes.)
CREATE TABLE IF NOT EXISTS role_policies (
    project         text        NOT NULL REFERENCES projects (project),
    role            text        COLLATE "C" NOT NULL CHECK (role <> ''),
    version         integer     NOT NULL DEFAULT 1 CHECK (version >= 1),
    token_budget    integer     CHECK (token_budget IS NULL OR token_budget >= 1),
    budget_max      boolean     NOT NULL DEFAULT false,
    kinds           text[]      CHECK (kinds IS NULL OR cardinality(kinds) >= 1),
    max_per_section jsonb       CHECK (max_per_section IS NULL OR jsonb_typeof(max_per_section) = 'object'),
    format          text,
    tokenizer       text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    created_by      text        NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    updated_by      text        NOT NULL,
    PRIMARY KEY (project, role),
    CHECK (NOT budget_max OR token_budget IS NOT NULL)
);

GRANT SELECT, INSERT ON role_policies TO contextd_app;
GRANT UPDATE (version, token_budget, budget_max, kinds, max_per_section, format, tokenizer, updated_at, updated_by)
    ON role_policies TO contextd_app;

-- +goose Down
DROP TABLE IF EXISTS role_policies;
