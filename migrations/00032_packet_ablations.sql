-- +goose Up

-- A counterfactual packet (issue 36): the request of an earlier packet
-- assembled again on that packet's snapshot without some of its entries.
-- It is a packet like any other; ablation_of names the packet it was made
-- from (NULL for every other packet), so the original's answer can list
-- its ablations and an ablation's answer its original. What it left out
-- travels in its stored request (request.ablation), which the packet's
-- audit entry covers, so a replay leaves out the same. The foreign key
-- holds the link to a packet of the same project (it includes project,
-- as Citus requires); the partial index answers "the ablations of this
-- packet" in order. (IF NOT EXISTS: the migration can run again on a
-- schema that has it.)
ALTER TABLE packets ADD COLUMN IF NOT EXISTS ablation_of text;
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'packets_ablation_of_fkey') THEN
        ALTER TABLE packets ADD CONSTRAINT packets_ablation_of_fkey
            FOREIGN KEY (project, ablation_of) REFERENCES packets (project, id);
    END IF;
END $$;
-- +goose StatementEnd
CREATE INDEX IF NOT EXISTS packets_ablation_of_idx ON packets (project, ablation_of, created_at, id)
    WHERE ablation_of IS NOT NULL;

-- +goose Down
DROP INDEX IF EXISTS packets_ablation_of_idx;
ALTER TABLE packets DROP CONSTRAINT IF EXISTS packets_ablation_of_fkey;
ALTER TABLE packets DROP COLUMN IF EXISTS ablation_of;
