-- +goose Up
-- The keyword lane of every packet reads items_trigger_terms_idx
-- (BoundedKeywordRefs; since 00038 it reads item_keyword_terms, and 00041
-- drops the index). With GIN's fast update on, a bulk import leaves its
-- new entries in the index's pending list, an unordered list that every
-- scan reads whole until a VACUUM (or 4 MB of it) merges it into the tree:
-- right after importing 10,000 items a packet's keyword read took 28 ms
-- instead of 0.7 ms, the most of the first minute's slowdown. Its entries
-- are few per item (the first word or the stem of each keyword), so
-- writing them into the tree at once costs an import little. The list an
-- existing deployment holds is merged now (the migration runs as the
-- index's owner, which gin_clean_pending_list requires).
-- items_search_idx keeps fast update: packet assembly never reads it (the
-- plans test in internal/store checks that), and its entries are every
-- lexeme of every live item, which an import would otherwise write one by
-- one into the tree.
-- (IF EXISTS: 00041 drops the index, and migrations from 00026 on run
-- again on a schema that has them.)
ALTER INDEX IF EXISTS items_trigger_terms_idx SET (fastupdate = off);
SELECT gin_clean_pending_list(x.idx) FROM (SELECT to_regclass('items_trigger_terms_idx') AS idx) x WHERE x.idx IS NOT NULL;

-- +goose Down
ALTER INDEX IF EXISTS items_trigger_terms_idx RESET (fastupdate);
