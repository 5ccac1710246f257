package handoff

import (
	"github.com/contextd/contextd/internal/store"
)

// The project's proposal events (an item write proposed, promoted or
// rejected; package item) travel in the handoff event stream, numbered in
// its sequence (project_counters.handoff_seq), so one Last-Event-ID
// resumes both: a role's inbox (target_role) carries the events of the
// proposals its agents could promote when they were made
// (store.Proposal.PromoterRoles), and an author's (source_role) those of
// the proposals of its role.

// mergeEvents merges a page of handoff events and one of proposal events
// (each in sequence order; full when its read hit the limit) into one
// page of at most limit events in sequence order. A full page may have
// stopped short of events of the other kind's range, so the merge ends
// at the lower of the full pages' last numbers: what comes after is read
// by the next page, never skipped.
func mergeEvents(hs []StreamEvent, hFull bool, ps []store.ProposalEvent, pFull bool, limit int) []StreamEvent {
	bound := int64(-1) // none
	if hFull && len(hs) > 0 {
		bound = hs[len(hs)-1].Seq
	}
	if pFull && len(ps) > 0 && (bound < 0 || ps[len(ps)-1].Seq < bound) {
		bound = ps[len(ps)-1].Seq
	}
	out := make([]StreamEvent, 0, min(limit, len(hs)+len(ps)))
	i, j := 0, 0
	for len(out) < limit && (i < len(hs) || j < len(ps)) {
		var next StreamEvent
		if j >= len(ps) || (i < len(hs) && hs[i].Seq < ps[j].Seq) {
			next = hs[i]
			i++
		} else {
			p := ps[j]
			next = StreamEvent{Event: Event{Seq: p.Seq, Event: p.Event, Actor: p.Actor, ActorRole: p.ActorRole,
				Reason: p.Reason, CreatedAt: p.CreatedAt}, Proposal: &p}
			j++
		}
		if bound >= 0 && next.Seq > bound {
			break
		}
		out = append(out, next)
	}
	return out
}
