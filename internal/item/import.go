package item

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/store"
)

// ImportTx writes an import of up to MaxBatch items in the caller's
// transaction, all or nothing, like a batch; an item whose retire flag is
// set (a KXM item of status superseded or rejected) is written and then
// tombstoned, so its content stays in the history and a packet's why says
// the item was deleted. Importing the same input again changes nothing: a
// retired item whose current tombstone follows a version with the same
// fields is unchanged, as a live item with the same fields is.
//
// A retired item's tombstone carries the metadata {"retired_by":
// "import", "kxm": {"status": ...}} taken from the import, so why can say
// the item was retired, and with which status.
//
// An item whose write asks to be a proposal (a KXM item of status
// proposed, or any item of an import that says "proposal": true) is
// proposed instead (cause import), after the writes; so is one over its
// writer's grant in a project whose on_excess_authority is propose.
func (s *Service) ImportTx(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj string, ins []Input, retire []bool) (BatchResult, error) {
	ps, causes, err := s.prepareBatch(ctx, tx.DB, agent, proj, ins, CauseImport)
	if err != nil {
		return BatchResult{}, err
	}
	if err := s.projects.Writable(ctx, tx, proj); err != nil {
		return BatchResult{}, err
	}
	var retiredKeys []string
	for i, p := range ps {
		if retire[i] && causes[i].cause == "" {
			retiredKeys = append(retiredKeys, p.key)
		}
	}
	out := make([]BatchEntry, len(ps))
	var todo []prepared
	var at []int
	if len(retiredKeys) > 0 {
		// Lock the rows first, in key order like the write path, so the
		// comparison below cannot race another writer.
		if _, err := tx.ItemLockCurrent(ctx, proj, sortedCopy(retiredKeys)); err != nil {
			return BatchResult{}, err
		}
	}
	prior, err := tx.ItemRetired(ctx, proj, retiredKeys)
	if err != nil {
		return BatchResult{}, err
	}
	for i, p := range ps {
		if causes[i].cause != "" {
			continue // proposed below
		}
		r, ok := prior[p.key]
		// A hidden item is left to the write path, which answers for it as
		// for a missing one: its existence is not the caller's to learn.
		if retire[i] && ok && bytes.Equal(r.FieldsSHA256, p.fieldsHash) && (agent.SeesAllRoles() || r.Roles.Visible(agent.Role)) {
			out[i] = BatchEntry{Key: p.key, Version: r.Version, Status: Unchanged, Tombstoned: true}
			continue
		}
		todo, at = append(todo, p), append(at, i)
	}
	written, err := s.write(ctx, tx, agent, proj, todo, nil)
	if err != nil {
		return BatchResult{}, fmt.Errorf("import to %s: %w", proj, err)
	}
	for j, e := range written {
		i := at[j]
		if retire[i] {
			v, err := s.tombstone(ctx, tx, agent, proj, e.Key, PutOpts{TombstoneMetadata: retiredMetadata(ins[i].Metadata)})
			if err != nil {
				return BatchResult{}, fmt.Errorf("import to %s: retire %s: %w", proj, e.Key, err)
			}
			e.Version, e.Tombstoned = v.Version, true
			if e.Status == Unchanged {
				e.Status = Updated // it was live with these fields; now it is retired
			}
		}
		out[i] = e
	}
	if _, proposed := splitByCause(causes); len(proposed) > 0 {
		if err := s.proposeImported(ctx, tx, agent, proj, ps, causes, proposed, out); err != nil {
			return BatchResult{}, fmt.Errorf("import to %s: %w", proj, err)
		}
	}
	return tally(out), nil
}

func sortedCopy(keys []string) []string {
	out := append([]string(nil), keys...)
	slices.Sort(out)
	return out
}

// tally counts a result's entries by status.
func tally(entries []BatchEntry) BatchResult {
	res := BatchResult{Items: entries}
	for _, e := range entries {
		switch e.Status {
		case Created:
			res.Created++
		case Updated:
			res.Updated++
		case Unchanged:
			res.Unchanged++
		case Proposed:
			res.Proposed++
		}
	}
	return res
}

// retiredMetadata is what a retired item's tombstone says: that an import
// retired it, and the KXM status it was imported with.
func retiredMetadata(meta json.RawMessage) json.RawMessage {
	var m struct {
		KXM struct {
			Status string `json:"status"`
		} `json:"kxm"`
	}
	_ = json.Unmarshal(meta, &m)
	out := map[string]any{"retired_by": "import"}
	if m.KXM.Status != "" {
		out["kxm"] = map[string]any{"status": m.KXM.Status}
	}
	b, _ := json.Marshal(out)
	return b
}
