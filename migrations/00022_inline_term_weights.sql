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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION contextd_term_weights(vec tsvector) RETURNS TABLE (lexeme text, weight integer)
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT u.lexeme,
           (1000 * coalesce(array_length(u.positions, 1), 1))
           / (coalesce(array_length(u.positions, 1), 1) + 1 + length(vec) / 64)
    FROM unnest(vec) AS u
$$;
-- +goose StatementEnd
