-- +goose Up

-- Keyword words are case-folded (upper, then lower) since this migration,
-- where they were lower-cased: the two differ only for letters such as the
-- final sigma (ς, which folds to σ), ſ, µ and ϑ. The first words that
-- assembly looks keyword items up by are folded again here, for the rows
-- that hold any non-ASCII letter; the database's upper() and lower() fold
-- as Go does for these letters under a UTF-8 ctype (under the C ctype they
-- leave non-ASCII letters as they are, and such an item is found again
-- once it is written).
UPDATE items
SET trigger_words = ARRAY(SELECT lower(upper(w)) FROM unnest(trigger_words) AS w),
    trigger_terms = ARRAY(SELECT split_part(t, E'\x1f', 1) || E'\x1f' || lower(upper(split_part(t, E'\x1f', 2)))
                          FROM unnest(trigger_terms) AS t)
WHERE trigger_kind = 'keywords' AND array_to_string(trigger_words, ' ') ~ '[^\x01-\x7f]';

-- +goose Down
SELECT 1;
