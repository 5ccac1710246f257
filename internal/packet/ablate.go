package packet

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/contextd/contextd/internal/assemble"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/ident"
	"github.com/contextd/contextd/internal/limits"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// MaxAblationsListed bounds the ablations a packet's answer lists (the
// oldest first): the answer stays bounded however often a packet is
// ablated.
const MaxAblationsListed = 100

// maxEntryName bounds the characters of one name in a without list: the
// longest item key (ctxtype.ValidKey), and more than any request part or
// handoff id.
const maxEntryName = 200

// Without is one entry a counterfactual packet is asked to leave out, as
// the caller names it: exactly one of Key (an item; Layer "project" or
// "shared" when it matters, else the one item of that key the packet
// included), Request (a part of the request: task, objective, criteria,
// plan, agent_context, context_packets[N]) or Handoff (a predecessor).
type Without struct {
	Key, Layer, Request, Handoff string
}

// Ablate assembles packet id's request again on its snapshot, at its time,
// without the entries named, and stores it as a packet of its own (a
// counterfactual, linked to the packet it was made from); it returns it as
// the agent may see it.
func (s *Service) Ablate(ctx context.Context, agent *auth.Agent, proj, id string, without []Without) (*Packet, error) {
	p, err := s.PrepareAblation(ctx, agent, proj, id, without)
	if err != nil {
		return nil, err
	}
	if err := s.store.InTx(ctx, func(tx *store.Tx) error { return s.StoreTx(ctx, tx, p) }); err != nil {
		return nil, err
	}
	return s.ForViewer(agent, p), nil
}

// PrepareAblation is the first half of Ablate, storing nothing (StoreTx
// stores it, in the caller's transaction). Whoever may open the packet may
// ablate it: the packet's own role, or an admin, as for assembling one
// (a packet the caller may not open is not found). An entry must be one
// the packet included as the caller sees it: an item hidden from the
// caller's role is refused exactly as one the packet never had.
func (s *Service) PrepareAblation(ctx context.Context, agent *auth.Agent, proj, id string, without []Without) (*Packet, error) {
	if err := checkWithout(without); err != nil {
		return nil, err
	}
	var src *assemble.MemorySource
	orig, err := s.read(ctx, agent, proj, id, func(db store.DB, p *Packet) error {
		var err error
		src, err = s.snapshotSource(ctx, db, proj, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	if proj == ctxtype.SharedProject && !agent.IsAdmin() {
		return nil, fmt.Errorf("%w: packets are assembled in a project; _shared is writable by admins only", fault.ErrForbidden)
	}
	subjects, err := resolveWithout(orig, without)
	if err != nil {
		return nil, err
	}
	req := *orig.Request
	req.Ablation = &ctxtype.Ablation{Of: orig.ID, At: orig.assembledAt(), Without: subjects}
	if prior := orig.Request.Ablation; prior != nil {
		// An ablation of an ablation leaves out what its parent left out
		// too: it is assembled from the same request and snapshot.
		req.Ablation.Without = append(slices.Clone(prior.Without), subjects...)
	}
	var point store.ReadPoint
	if err := s.store.Snapshot(ctx, func(tx *store.Tx) (err error) { point, err = tx.PacketReadPoint(ctx); return err }); err != nil {
		return nil, err
	}
	newID := ident.New("ctxpkt")
	in := assemble.Input{Project: proj, PacketID: newID, Request: &req, Now: req.Ablation.At, Predecessors: orig.Predecessors, Render: orig.RenderVersion}
	res, _, err := assemble.AssembleBounded(ctx, in, src, assemble.Options{Stages: s.stages})
	if err != nil {
		return nil, fmt.Errorf("assemble: %w", err)
	}
	p, err := build(agent, newID, proj, &req, store.ReadPoint{Now: point.Now, Snapshot: orig.Snapshot}, res, orig.Predecessors)
	if err != nil {
		return nil, err
	}
	p.AblationOf = orig.ID
	return p, nil
}

// assembledAt is the time the packet's assembly judged validity at: its
// creation, or for a counterfactual the time of the packet it was made
// from.
func (p *Packet) assembledAt() time.Time {
	if a := p.Request.Ablation; a != nil {
		return a.At
	}
	return p.CreatedAt
}

// checkWithout refuses a without list that is empty, too long, or holds an
// entry that names not exactly one thing, before anything is read.
func checkWithout(without []Without) error {
	var errs validation.List
	if len(without) == 0 {
		errs.Add("/without", "required", "name at least one entry to leave out")
	}
	limits.Items(&errs, "/without", len(without), limits.Get().List)
	if err := errs.Err(); err != nil {
		return err
	}
	for i, w := range without {
		at := fmt.Sprintf("/without/%d", i)
		n := 0
		for _, v := range []string{w.Key, w.Request, w.Handoff} {
			if v != "" {
				n++
			}
		}
		if n != 1 {
			errs.Add(at, "one_of", "an entry names exactly one of key, request or handoff")
			continue
		}
		if w.Layer != "" && (w.Key == "" || !validation.OneOf(w.Layer, "project", "shared")) {
			errs.Add(at+"/layer", "enum", "layer is project or shared, and only with key")
		}
		limits.Chars(&errs, at+"/key", w.Key, maxEntryName)
		limits.Chars(&errs, at+"/request", w.Request, maxEntryName)
		limits.Chars(&errs, at+"/handoff", w.Handoff, maxEntryName)
	}
	return errs.Err()
}

// resolveWithout names each entry as its record does, from the records of
// the packet the caller may see: an entry that is not one the packet
// included (not there, left out, hidden from the caller) is refused at its
// pointer, and so is one named twice.
func resolveWithout(p *Packet, without []Without) ([]ctxtype.Subject, error) {
	var errs validation.List
	out := make([]ctxtype.Subject, 0, len(without))
	for i, w := range without {
		at := fmt.Sprintf("/without/%d", i)
		subj, ok := includedEntry(p.Records, w)
		switch {
		case !ok:
			errs.Add(at, "not_included", "%s is not an entry packet %s included", describeWithout(w), p.ID)
		case slices.Contains(out, subj):
			errs.Add(at, "duplicate", "%s is named twice", describeWithout(w))
		default:
			out = append(out, subj)
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// includedEntry finds the included record w names.
func includedEntry(records []ctxtype.Record, w Without) (ctxtype.Subject, bool) {
	for _, r := range records {
		if r.Decision != ctxtype.Included {
			continue
		}
		switch {
		case w.Key != "" && r.SubjectKind == ctxtype.SubjectItem && r.SubjectKey == w.Key && (w.Layer == "" || w.Layer == r.Layer):
			return ctxtype.Subject{Kind: ctxtype.SubjectItem, Project: r.SubjectProject, Key: r.SubjectKey}, true
		case w.Request != "" && r.SubjectKind == ctxtype.SubjectRequest && r.SubjectKey == w.Request,
			w.Handoff != "" && r.SubjectKind == ctxtype.SubjectHandoff && r.SubjectKey == w.Handoff:
			return ctxtype.Subject{Kind: r.SubjectKind, Key: r.SubjectKey}, true
		}
	}
	return ctxtype.Subject{}, false
}

func describeWithout(w Without) string {
	switch {
	case w.Key != "" && w.Layer != "":
		return fmt.Sprintf("item %q (%s)", w.Key, w.Layer)
	case w.Key != "":
		return fmt.Sprintf("item %q", w.Key)
	case w.Request != "":
		return fmt.Sprintf("request part %q", w.Request)
	}
	return fmt.Sprintf("handoff %q", w.Handoff)
}
