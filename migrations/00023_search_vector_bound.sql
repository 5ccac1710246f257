-- +goose Up

-- A tsvector holds at most 1 MB (PostgreSQL's MAXSTRPOS), and an item's
-- text within the content limit can make a larger one: 1 MB of log lines
-- of distinct ids made 1.8 MB, and the write failed with "string is too
-- long for tsvector" (SQLSTATE 54000), a 500. contextd_search_vector now
-- never fails: text under 256 KB (at most ~3 bytes of vector per byte of
-- text: distinct three-letter words made 2.9, CJK characters 3.0, numbers
-- 2.4) goes to to_tsvector as before;
-- longer text is tried whole, and when its vector would not fit, the
-- longest prefix tried (three quarters at a time) whose vector fits is
-- indexed. The words past that prefix are not found by search; every
-- vector that could be made before is made the same.
-- +goose StatementBegin
-- (PARALLEL RESTRICTED: a parallel worker cannot start the subtransaction
-- of its EXCEPTION block, so it runs in the leader.)
CREATE FUNCTION contextd_search_vector_long(txt text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE PARALLEL RESTRICTED AS $$
DECLARE
    n integer := length(txt);
BEGIN
    LOOP
        BEGIN
            RETURN to_tsvector('english'::regconfig, left(txt, n));
        EXCEPTION WHEN program_limit_exceeded THEN
            n := n * 3 / 4;
        END;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION contextd_search_vector(title text, summary text, content text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL RESTRICTED
AS $$ SELECT CASE WHEN octet_length(title) + octet_length(summary) + octet_length(content) < 262144
                  THEN to_tsvector('english'::regconfig, title || ' ' || summary || ' ' || content)
                  ELSE contextd_search_vector_long(title || ' ' || summary || ' ' || content) END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION contextd_search_vector(title text, summary text, content text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT to_tsvector('english'::regconfig, title || ' ' || summary || ' ' || content) $$;
-- +goose StatementEnd
DROP FUNCTION contextd_search_vector_long(text);
