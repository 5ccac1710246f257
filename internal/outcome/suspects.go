package outcome

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/packet"
	"github.com/contextd/contextd/internal/store"
)

// The kinds of evidence against a suspect, and its confidences: only an
// ablation that succeeded makes a suspect causal.
const (
	EvidenceUsed     = "used"
	EvidenceContrast = "contrast"
	EvidenceChanged  = "changed"
	EvidenceAblation = "ablation"

	Correlational = "correlational"
	Causal        = "causal"

	// ScopeRole and ScopeTask are the scopes of a contrast: the packet's
	// target role, or its task and step within it.
	ScopeRole = "role"
	ScopeTask = "task"
)

// The weights of the evidence in a suspect's score (docs/outcomes.md):
// an ablation outweighs all the correlational evidence together, which
// is at most 1 + 0.5 + 0.25.
const (
	weightAblation = 3
	weightUsed     = 0.5
	weightChanged  = 0.25
)

// Suspect is one included entry of a failed packet, with the evidence
// that it caused the failure and its score (higher: more suspect).
type Suspect struct {
	store.Entry
	Score      float64
	Confidence string
	Evidence   []Evidence
}

// Evidence is one reason to suspect an entry; Kind says which of its
// members are set.
type Evidence struct {
	Kind string
	// used: the best similarity among the failed outcomes' answers, and
	// the outcome it is of.
	Similarity float64
	OutcomeID  string
	// contrast: outcomes (failures counting partials) of the scope with
	// and without the entry, this packet's own counted, and the score.
	Scope                                                          string
	FailuresWith, SuccessesWith, FailuresWithout, SuccessesWithout int
	Contrast                                                       float64
	// changed: the task's last successful packet, and the version of the
	// item it included (0: none).
	SincePacket     string
	PreviousVersion int
	// ablation: the counterfactual without the entry that succeeded.
	PacketID string
}

// scopesOf is where an outcome of a packet counts: its role, and its task
// and step when it has a task.
func scopesOf(pk *packet.Packet) []store.OutcomeScope {
	out := []store.OutcomeScope{{Project: pk.Project, TargetRole: pk.TargetRole}}
	if pk.TaskID != "" {
		out = append(out, contrastScope(pk))
	}
	return out
}

// contrastScope is the scope a packet's entries are contrasted in: its
// task and step when it has a task, else its role.
func contrastScope(pk *packet.Packet) store.OutcomeScope {
	sc := store.OutcomeScope{Project: pk.Project, TargetRole: pk.TargetRole, TaskID: pk.TaskID}
	if sc.TaskID != "" && pk.Request != nil && pk.Request.Task != nil {
		sc.StepID = pk.Request.Task.StepID
	}
	return sc
}

// Suspects ranks the included entries of a packet the agent may open
// (not found otherwise) that it may see by the evidence that they caused
// its failed or partial outcomes. A packet without such an outcome has
// no suspects (an empty list): there is nothing to explain. The cost is
// bounded by the packet: one read per kind of evidence for all its
// entries at once, the contrast from the counters kept by RecordTx.
func (s *Service) Suspects(ctx context.Context, agent *auth.Agent, proj, packetID string) ([]Suspect, error) {
	pk, err := s.packets.Get(ctx, agent, proj, packetID)
	if err != nil {
		return nil, err
	}
	entries, idx := includedEntries(pk.Records)
	ev, err := s.evidenceOf(ctx, pk, entries)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(ev.outcomes, failed) {
		return []Suspect{}, nil
	}
	sus := make([]Suspect, len(entries))
	for i, e := range entries {
		sus[i] = Suspect{Entry: e, Confidence: Correlational}
	}
	addUsed(sus, idx, ev.outcomes)
	addContrast(contrastScope(pk), sus, entries, ev.totals, ev.counts)
	addChanged(sus, idx, ev.since, ev.sinceRecords)
	addAblations(sus, idx, ev.ablations)
	for i := range sus {
		sus[i].Score = score(&sus[i])
	}
	slices.SortStableFunc(sus, func(a, b Suspect) int {
		return cmp.Or(cmp.Compare(b.Score, a.Score), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Key, b.Key),
			cmp.Compare(a.Project, b.Project), cmp.Compare(a.Version, b.Version))
	})
	return sus, nil
}

// evidence is what suspects are judged by, read in one snapshot so that
// the outcomes and the counters agree.
type evidence struct {
	outcomes     []store.Outcome
	totals       store.Tally
	counts       map[store.Entry]store.Tally
	since        string           // the task's last successful packet of the role
	sinceRecords []ctxtype.Record // its records
	ablations    []store.JudgedAblation
}

// evidenceOf reads the packet's outcomes, the counters of its scope for
// every entry with the scope's totals, the task's last success and the
// packet's ablations that have outcomes in one round trip, then the records of
// that success.
func (s *Service) evidenceOf(ctx context.Context, pk *packet.Packet, entries []store.Entry) (evidence, error) {
	var ev evidence
	sc := contrastScope(pk)
	err := s.store.Snapshot(ctx, func(tx *store.Tx) error {
		err := tx.Reads(ctx,
			func(db store.DB) (err error) {
				ev.outcomes, err = db.OutcomeList(ctx, pk.Project, pk.ID, 0, MaxPerPacket)
				return err
			},
			func(db store.DB) (err error) { ev.totals, err = db.OutcomeTotals(ctx, sc); return err },
			func(db store.DB) (err error) { ev.counts, err = db.OutcomeCounts(ctx, sc, entries); return err },
			func(db store.DB) (err error) {
				if pk.TaskID == "" {
					return nil
				}
				ev.since, err = db.PacketLastSuccessOfTask(ctx, pk.Project, pk.TaskID, pk.TargetRole, pk.CreatedAt)
				return err
			},
			func(db store.DB) (err error) {
				ev.ablations, err = db.PacketAblationsJudged(ctx, pk.Project, pk.ID, packet.MaxAblationsListed)
				return err
			},
		)
		if err != nil || ev.since == "" || !slices.ContainsFunc(ev.outcomes, failed) {
			return err
		}
		ev.sinceRecords, err = tx.PacketRecordList(ctx, pk.Project, ev.since)
		return err
	})
	return ev, err
}

func failed(o store.Outcome) bool { return o.Status == Failure || o.Status == Partial }

// includedEntries is the distinct entries of the included records, in
// record order, and the index of each.
func includedEntries(records []ctxtype.Record) ([]store.Entry, map[store.Entry]int) {
	var out []store.Entry
	idx := map[store.Entry]int{}
	for _, r := range records {
		if r.Decision != ctxtype.Included {
			continue
		}
		e := store.EntryOf(r)
		if _, ok := idx[e]; !ok {
			idx[e] = len(out)
			out = append(out, e)
		}
	}
	return out, idx
}

// addUsed names, for each entry a failed or partial outcome's answer
// used, the best similarity (the first outcome of that similarity).
func addUsed(sus []Suspect, idx map[store.Entry]int, outs []store.Outcome) {
	best := map[int]Evidence{}
	for _, o := range outs {
		if !failed(o) {
			continue
		}
		for _, u := range o.Used {
			i, ok := idx[store.Entry{Kind: u.Subject, Project: u.Project, Key: u.Key, Version: u.Version}]
			if ok && (best[i].OutcomeID == "" || u.Similarity > best[i].Similarity) {
				best[i] = Evidence{Kind: EvidenceUsed, Similarity: u.Similarity, OutcomeID: o.ID}
			}
		}
	}
	for i, ev := range best {
		sus[i].Evidence = append(sus[i].Evidence, ev)
	}
}

// addContrast gives every entry the counters of the packet's scope, with
// the scope's totals.
func addContrast(sc store.OutcomeScope, sus []Suspect, entries []store.Entry, totals store.Tally, counts map[store.Entry]store.Tally) {
	name := ScopeRole
	if sc.TaskID != "" {
		name = ScopeTask
	}
	for i, e := range entries {
		with := counts[e]
		ev := Evidence{Kind: EvidenceContrast, Scope: name, FailuresWith: with.Failures + with.Partials, SuccessesWith: with.Successes}
		ev.FailuresWithout = max(totals.Failures+totals.Partials-ev.FailuresWith, 0)
		ev.SuccessesWithout = max(totals.Successes-ev.SuccessesWith, 0)
		ev.Contrast = round(ContrastScore(ev.FailuresWith, ev.SuccessesWith, ev.FailuresWithout, ev.SuccessesWithout))
		sus[i].Evidence = append(sus[i].Evidence, ev)
	}
}

// ContrastScore is the Laplace-smoothed failure rate of the outcomes with
// an entry less that of the outcomes without it: (fw+1)/(fw+sw+2) −
// (fo+1)/(fo+so+2), in (−1, 1); 0 when nothing tells them apart.
func ContrastScore(failuresWith, successesWith, failuresWithout, successesWithout int) float64 {
	rate := func(f, s int) float64 { return float64(f+1) / float64(f+s+2) }
	return rate(failuresWith, successesWith) - rate(failuresWithout, successesWithout)
}

// addChanged marks the item versions a packet with a task included that
// the task's last successful packet of the same role (before it) did not:
// one lookup of that packet, one read of its records.
func addChanged(sus []Suspect, idx map[store.Entry]int, since string, prev []ctxtype.Record) {
	if since == "" {
		return
	}
	had := map[[2]string]int{} // (layer, key) → version the successful packet included
	for _, r := range prev {
		if r.Decision == ctxtype.Included && r.SubjectKind == ctxtype.SubjectItem {
			had[[2]string{r.SubjectProject, r.SubjectKey}] = r.SubjectVersion
		}
	}
	for e, i := range idx {
		if e.Kind != ctxtype.SubjectItem {
			continue
		}
		if v, ok := had[[2]string{e.Project, e.Key}]; !ok || v != e.Version {
			sus[i].Evidence = append(sus[i].Evidence, Evidence{Kind: EvidenceChanged, SincePacket: since, PreviousVersion: v})
		}
	}
}

// addAblations marks causal the entries that an ablation of the packet
// proves (the oldest packet.MaxAblationsListed ablations with outcomes; the
// first that proves an entry): one that left out that entry alone and got
// a success, or one that left out a set and got a success where, for each
// entry of the set, the ablation that left out the rest of the set alone
// failed (never succeeded), so that each entry of the set is needed for
// the success: the set is 1-minimal, as the trials of contextd bisect
// show it. A success without a larger set that is not shown minimal (the
// packet without every entry, bisect's first trial) says only that some
// entry of the set mattered, and proves none of them.
func addAblations(sus []Suspect, idx map[store.Entry]int, abls []store.JudgedAblation) {
	failedSets := map[string]bool{}
	for _, a := range abls {
		if a.Failed && !a.Succeeded {
			failedSets[subjectSet(a.Without, -1)] = true
		}
	}
	for _, a := range abls {
		if !a.Succeeded || !minimal(a.Without, failedSets) {
			continue
		}
		for e, i := range idx {
			if sus[i].Confidence == Causal || !leftOut(a.Without, e) {
				continue
			}
			sus[i].Confidence = Causal
			sus[i].Evidence = append(sus[i].Evidence, Evidence{Kind: EvidenceAblation, PacketID: a.ID})
		}
	}
}

// minimal reports whether leaving out without is shown to need every one
// of its entries: it has one, or without it less each one failed.
func minimal(without []ctxtype.Subject, failedSets map[string]bool) bool {
	if len(without) == 0 {
		return false
	}
	for i := range without {
		if len(without) > 1 && !failedSets[subjectSet(without, i)] {
			return false
		}
	}
	return true
}

// subjectSet names a set of subjects (less the one at skip, -1 for none)
// whatever their order.
func subjectSet(without []ctxtype.Subject, skip int) string {
	names := make([]string, 0, len(without))
	for i, s := range without {
		if i != skip {
			names = append(names, s.Kind+"\x00"+s.Project+"\x00"+s.Key)
		}
	}
	slices.Sort(names)
	return strings.Join(names, "\x01")
}

func leftOut(without []ctxtype.Subject, e store.Entry) bool {
	a := ctxtype.Ablation{Without: without}
	return a.Leaves(e.Kind, e.Project, e.Key)
}

// score is a suspect's: weightAblation when an ablation proved it, plus
// its contrast score, plus weightUsed × the similarity of its use by a
// failed answer, plus weightChanged when it is new since the task's last
// success; rounded to four decimals so that the answer's bytes are stable.
func score(s *Suspect) float64 {
	var total float64
	for _, ev := range s.Evidence {
		switch ev.Kind {
		case EvidenceAblation:
			total += weightAblation
		case EvidenceContrast:
			total += ev.Contrast
		case EvidenceUsed:
			total += weightUsed * ev.Similarity
		case EvidenceChanged:
			total += weightChanged
		}
	}
	return round(total)
}

func round(f float64) float64 { return math.Round(f*1e4) / 1e4 }
