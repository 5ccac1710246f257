-- name: ProposalLockKeys :one
-- Serialises the proposal writes and decisions of each key until the
-- transaction ends, in key order (one lock order for every writer): a
-- key may have no item row to lock yet. Taken after the item rows'
-- locks, as every writer of both takes them.
SELECT count(pg_advisory_xact_lock(hashtextextended('contextd.proposal/' || @project::text || '/' || k.key, 37)))::integer
FROM (SELECT DISTINCT key FROM unnest(@keys::text[]) AS u(key) ORDER BY key) AS k;

-- name: ProposalHeads :many
-- Per key: its last proposal number and how many of its proposals are
-- pending (no decision).
SELECT p.key, max(p.proposal)::integer AS last,
       count(*) FILTER (WHERE d.proposal IS NULL)::integer AS pending
FROM item_proposals p
LEFT JOIN item_proposal_decisions d ON d.project = p.project AND d.key = p.key AND d.proposal = p.proposal
WHERE p.project = @project AND p.key = ANY(@keys::text[])
GROUP BY p.key;

-- name: ProposalPendingBy :many
-- The pending proposals of keys by one author: a write that proposes the
-- same fields again (an import run twice) answers the one it made.
SELECT p.* FROM item_proposals p
WHERE p.project = @project AND p.key = ANY(@keys::text[]) AND p.created_by = @created_by
  AND NOT EXISTS (SELECT 1 FROM item_proposal_decisions d
                  WHERE d.project = p.project AND d.key = p.key AND d.proposal = p.proposal);

-- name: ProposalInsert :one
INSERT INTO item_proposals (
    project, key, proposal, seq, base_version, cause, cause_detail, fields, fields_sha256,
    promoter_roles, created_by, created_by_name, created_by_role
) VALUES (
    @project, @key, @proposal, @seq, @base_version, @cause, @cause_detail, @fields, @fields_sha256,
    @promoter_roles, @created_by, @created_by_name, @created_by_role
)
RETURNING *;

-- name: ProposalGet :one
SELECT * FROM item_proposals WHERE project = @project AND key = @key AND proposal = @proposal;

-- name: ProposalDecisionGet :one
SELECT * FROM item_proposal_decisions WHERE project = @project AND key = @key AND proposal = @proposal;

-- name: ProposalDecisionInsert :one
INSERT INTO item_proposal_decisions (
    project, key, proposal, seq, decision, reason, version, superseded_version, rebased, created_by, created_by_role
) VALUES (
    @project, @key, @proposal, @seq, @decision, @reason, sqlc.narg('version'), sqlc.narg('superseded_version'),
    @rebased, @created_by, @created_by_role
)
RETURNING *;

-- name: ProposalList :many
-- A page of a project's proposals (or one item's, with key), oldest
-- first by their event's number, of one status ('' any), that a caller
-- of role may see: the item's current roles (when it has a row) and the
-- proposal's own allow it, or see_all.
SELECT p.* FROM item_proposals p
LEFT JOIN items i ON i.project = p.project AND i.key = p.key
WHERE p.project = @project AND p.seq > @after_seq
  AND (sqlc.narg('key')::text IS NULL OR p.key = sqlc.narg('key'))
  AND CASE @status::text
        WHEN '' THEN true
        WHEN 'pending' THEN NOT EXISTS (
            SELECT 1 FROM item_proposal_decisions d WHERE d.project = p.project AND d.key = p.key AND d.proposal = p.proposal)
        ELSE EXISTS (
            SELECT 1 FROM item_proposal_decisions d
            WHERE d.project = p.project AND d.key = p.key AND d.proposal = p.proposal AND d.decision = @status::text)
      END
  AND (@see_all::boolean OR (
        (i.key IS NULL OR (NOT (@role::text = ANY(i.hidden_from)) AND (cardinality(i.visible_to) = 0 OR @role::text = ANY(i.visible_to))))
        AND NOT ((p.fields -> 'roles' -> 'hidden_from') @> to_jsonb(@role::text))
        AND (jsonb_array_length(p.fields -> 'roles' -> 'visible_to') = 0
             OR (p.fields -> 'roles' -> 'visible_to') @> to_jsonb(@role::text))))
ORDER BY p.seq
LIMIT @lim;

-- name: ProposalDecisionsOf :many
-- The decisions of the proposals named by (key, proposal) pairs.
SELECT d.* FROM item_proposal_decisions d
JOIN (SELECT unnest(@keys::text[]) AS key, unnest(@proposals::integer[]) AS proposal) AS w
  ON d.key = w.key AND d.proposal = w.proposal
WHERE d.project = @project;

-- name: ProposalLinks :many
-- The promotions that made or superseded any of an item's versions.
SELECT d.proposal, d.version, d.superseded_version, d.created_at, p.created_by AS proposed_by
FROM item_proposal_decisions d
JOIN item_proposals p ON p.project = d.project AND p.key = d.key AND p.proposal = d.proposal
WHERE d.project = @project AND d.key = @key AND d.decision = 'promoted'
  AND (d.version = ANY(@versions::integer[]) OR d.superseded_version = ANY(@versions::integer[]))
ORDER BY d.proposal;

-- name: ItemVersionCurrentProposals :one
-- An item's current version with how many of its proposals are pending
-- (those whose own roles let a caller of role see them, or every one with
-- see_all: the caller sees the item, which the caller checks) and the
-- promotion that made it, if one did: GET of an item in one statement.
SELECT sqlc.embed(v),
    (SELECT count(*) FROM item_proposals p
     WHERE p.project = i.project AND p.key = i.key
       AND NOT EXISTS (SELECT 1 FROM item_proposal_decisions d
                       WHERE d.project = p.project AND d.key = p.key AND d.proposal = p.proposal)
       AND (@see_all::boolean OR (
             NOT ((p.fields -> 'roles' -> 'hidden_from') @> to_jsonb(@role::text))
             AND (jsonb_array_length(p.fields -> 'roles' -> 'visible_to') = 0
                  OR (p.fields -> 'roles' -> 'visible_to') @> to_jsonb(@role::text)))))::integer AS pending_proposals,
    coalesce((SELECT d.proposal FROM item_proposal_decisions d
              WHERE d.project = i.project AND d.key = i.key AND d.version = i.current_version AND d.decision = 'promoted'
              ORDER BY d.proposal LIMIT 1), 0)::integer AS promoted_from,
    coalesce((SELECT p.created_by FROM item_proposal_decisions d
              JOIN item_proposals p ON p.project = d.project AND p.key = d.key AND p.proposal = d.proposal
              WHERE d.project = i.project AND d.key = i.key AND d.version = i.current_version AND d.decision = 'promoted'
              ORDER BY d.proposal LIMIT 1), '')::text AS proposed_by
FROM items i
JOIN item_version_rows v ON v.project = i.project AND v.key = i.key AND v.version = i.current_version
WHERE i.project = @project AND i.key = @key;

-- name: ProposalPromoters :many
-- The grants of the live agents that may edit a project, other than an
-- author (by id and by name: two agents of one name are one principal):
-- who could promote a proposal, once its authority and roles are known.
SELECT DISTINCT role, permission, coalesce(max_authority, '')::text AS max_authority,
       ('*' = ANY(projects) OR '_shared' = ANY(projects))::boolean AS shared_scope
FROM agents
WHERE revoked_at IS NULL AND permission IN ('edit', 'admin')
  AND ('*' = ANY(projects) OR @project::text = ANY(projects))
  AND id <> @author AND name <> @author_name;

-- name: ProposalEventMaxSeq :one
SELECT greatest(
    coalesce((SELECT max(p.seq) FROM item_proposals p WHERE p.project = @project::text), 0),
    coalesce((SELECT max(d.seq) FROM item_proposal_decisions d WHERE d.project = @project::text), 0))::bigint;

-- name: ProposalEventStream :many
-- A project's proposal events after a number (their creations and
-- decisions), for the inboxes of one role that may promote them
-- (target_role) and of their authors' role (source_role); null: any. Only
-- the events a listener of role may see, as ProposalList decides it (the
-- item's current roles, and the proposal's own), or every one with
-- see_all: an event names its item and carries a rejection's reason.
SELECT e.seq, e.event, e.key, e.proposal, e.authority, e.promoter_roles, e.author, e.author_role,
       e.actor, e.actor_role, e.reason, e.version, e.created_at
FROM (
    SELECT p.seq, 'proposal_created'::text AS event, p.key, p.proposal, (p.fields ->> 'authority')::text AS authority,
           p.promoter_roles, p.created_by AS author, p.created_by_role AS author_role,
           p.created_by AS actor, p.created_by_role AS actor_role, ''::text AS reason, 0::integer AS version, p.created_at,
           p.fields
    FROM item_proposals p
    WHERE p.project = @project AND p.seq > @after
    UNION ALL
    SELECT d.seq, ('proposal_' || d.decision)::text, d.key, d.proposal, (p.fields ->> 'authority')::text,
           p.promoter_roles, p.created_by, p.created_by_role,
           d.created_by, d.created_by_role, d.reason, coalesce(d.version, 0)::integer, d.created_at,
           p.fields
    FROM item_proposal_decisions d
    JOIN item_proposals p ON p.project = d.project AND p.key = d.key AND p.proposal = d.proposal
    WHERE d.project = @project AND d.seq > @after
) AS e
LEFT JOIN items i ON i.project = @project AND i.key = e.key
WHERE (sqlc.narg('target_role')::text IS NULL OR sqlc.narg('target_role')::text = ANY(e.promoter_roles))
  AND (sqlc.narg('source_role')::text IS NULL OR e.author_role = sqlc.narg('source_role')::text)
  AND (@see_all::boolean OR (
        (i.key IS NULL OR (NOT (@role::text = ANY(i.hidden_from)) AND (cardinality(i.visible_to) = 0 OR @role::text = ANY(i.visible_to))))
        AND NOT ((e.fields -> 'roles' -> 'hidden_from') @> to_jsonb(@role::text))
        AND (jsonb_array_length(e.fields -> 'roles' -> 'visible_to') = 0
             OR (e.fields -> 'roles' -> 'visible_to') @> to_jsonb(@role::text))))
ORDER BY e.seq
LIMIT @max;

-- name: ProposalNumbers :many
-- A page of a project's proposals by (key, proposal), for the audit's
-- check that every proposal has its entry.
SELECT key, proposal FROM item_proposals
WHERE project = @project AND (key, proposal) > (@after_key::text, @after_proposal::integer)
ORDER BY key, proposal LIMIT @lim;

-- name: ProposalDecisionNumbers :many
-- The same for the decisions.
SELECT key, proposal FROM item_proposal_decisions
WHERE project = @project AND (key, proposal) > (@after_key::text, @after_proposal::integer)
ORDER BY key, proposal LIMIT @lim;

-- name: ProposalGetMany :many
SELECT p.* FROM item_proposals p
JOIN (SELECT unnest(@keys::text[]) AS key, unnest(@proposals::integer[]) AS proposal) AS w
  ON p.key = w.key AND p.proposal = w.proposal
WHERE p.project = @project;
