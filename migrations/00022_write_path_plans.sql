-- +goose Up

-- contextd_term_weights loses STRICT, and only that: PostgreSQL inlines a
-- set-returning SQL function into the query that calls it only when the
-- function is not strict, and the write path calls it once per relevance
-- item of a write (ItemTermsInsert), where the call's own executor cost
-- came to about a fifth of the statement. Its answer is unchanged: for a
-- NULL vector unnest gives no rows, as the strict function did.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION contextd_term_weights(vec tsvector) RETURNS TABLE (lexeme text, weight integer)
LANGUAGE sql IMMUTABLE AS $$
    SELECT u.lexeme,
           (1000 * coalesce(array_length(u.positions, 1), 1))
           / (coalesce(array_length(u.positions, 1), 1) + 1 + length(vec) / 64)
    FROM unnest(vec) AS u
$$;
-- +goose StatementEnd

-- contextd_item_terms_delete deletes the relevance index rows of keys, one
-- statement per key on the primary key's (project, key) prefix. As one
-- statement over key = ANY(keys), its plan followed the statistics, and
-- statistics taken while item_terms was small (autovacuum off, or not yet
-- run) made it read every row of the project for each write.
-- +goose StatementBegin
CREATE FUNCTION contextd_item_terms_delete(p text, keys text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    k text;
BEGIN
    FOREACH k IN ARRAY keys LOOP
        DELETE FROM item_terms WHERE project = p AND key = k;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION contextd_item_terms_delete(text, text[]);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION contextd_term_weights(vec tsvector) RETURNS TABLE (lexeme text, weight integer)
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT u.lexeme,
           (1000 * coalesce(array_length(u.positions, 1), 1))
           / (coalesce(array_length(u.positions, 1), 1) + 1 + length(vec) / 64)
    FROM unnest(vec) AS u
$$;
-- +goose StatementEnd
