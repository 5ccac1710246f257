// Package outcome keeps how a packet's answer went (issue 36): outcomes
// that the packet's own agent, or an agent that may write the project,
// records against a stored packet. They are append-only, several per
// packet up to MaxPerPacket, each an entry of the project's audit chain.
// An outcome that carries the model's answer is attributed to the
// packet's spans once, when it is written, with the attribute endpoint's
// matching (package attribute): the included entries the answer quoted or
// paraphrased are kept with it as its "used" entries, for the ledger and
// the suspects that read them. Every reader sees only the used entries
// whose records it may see in the packet.
package outcome

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/contextd/contextd/internal/attribute"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/ident"
	"github.com/contextd/contextd/internal/limits"
	"github.com/contextd/contextd/internal/packet"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// MaxPerPacket is how many outcomes one packet may have: a loop that
// records outcomes cannot grow a packet's history without bound (409
// conflict past it).
const MaxPerPacket = 100

// The statuses and sources of an outcome.
const (
	Success = "success"
	Failure = "failure"
	Partial = "partial"

	Human     = "human"
	Evaluator = "evaluator"
	Agent     = "agent"
	Test      = "test"
)

// Statuses and Sources are the values an outcome may have, in order.
var (
	Statuses = []string{Success, Failure, Partial}
	Sources  = []string{Agent, Evaluator, Human, Test}
)

// DefaultSource is the source of an outcome that names none: whoever
// calls is an agent of contextd; a human or an evaluator says so.
const DefaultSource = Agent

// Params are an outcome as a caller gives it: Status is required, the
// rest optional ("" and nil: not given).
type Params struct {
	Status, Source string
	Answer         *string
	Score          *float64
	Label, Note    string
}

func (p *Params) validate() error {
	var errs validation.List
	switch {
	case p.Status == "":
		errs.Add("/status", "required", "status is required: one of success, failure, partial")
	case !validation.OneOf(p.Status, Statuses...):
		errs.Add("/status", "enum", "status must be success, failure or partial, not %s", validation.QuoteShort(p.Status))
	}
	if p.Source == "" {
		p.Source = DefaultSource
	} else if !validation.OneOf(p.Source, Sources...) {
		errs.Add("/source", "enum", "source must be human, evaluator, agent or test, not %s", validation.QuoteShort(p.Source))
	}
	if p.Score != nil && (math.IsNaN(*p.Score) || *p.Score < 0 || *p.Score > 1) {
		errs.Add("/score", "range", "score must be between 0 and 1, not %v", *p.Score)
	}
	l := limits.Get()
	if p.Answer != nil {
		if *p.Answer == "" {
			p.Answer = nil // no answer: nothing to attribute
		} else {
			limits.Bytes(&errs, "/answer", len(*p.Answer), l.Message)
		}
	}
	limits.Chars(&errs, "/label", p.Label, l.Keyword)
	limits.Chars(&errs, "/note", p.Note, l.Text)
	return errs.Err()
}

// Service records and reads outcomes.
type Service struct {
	store    *store.Store
	projects *project.Service
	packets  *packet.Service
}

// NewService returns the outcome service.
func NewService(st *store.Store, projects *project.Service, packets *packet.Service) *Service {
	return &Service{store: st, projects: projects, packets: packets}
}

// Draft is an outcome ready to be written: checked, its answer
// attributed, and what its writer may see of the packet.
type Draft struct {
	agent   *auth.Agent
	outcome store.Outcome
	shown   []ctxtype.Record
	// scopes are where the outcome counts for suspects (scopesOf).
	scopes []store.OutcomeScope
}

// Prepare checks an outcome of a packet and attributes its answer, before
// the write transaction (which then holds one connection only). A packet
// that does not exist or that the agent may not open is not found; one it
// may open but neither made nor may write the project of is forbidden.
func (s *Service) Prepare(ctx context.Context, agent *auth.Agent, proj, packetID string, p Params) (*Draft, error) {
	pk, err := s.packets.Get(ctx, agent, proj, packetID)
	if err != nil {
		return nil, err
	}
	if agent.ID != pk.CreatedBy && !agent.Can(proj, auth.Edit) {
		return nil, fmt.Errorf("%w: only the packet's own agent, or one with edit permission on project %s, records its outcomes",
			fault.ErrForbidden, proj)
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	o := store.Outcome{Project: proj, PacketID: packetID, CreatedBy: agent.ID, Status: p.Status, Source: p.Source,
		Score: p.Score, Label: p.Label, Note: p.Note, Answer: p.Answer, Used: []store.OutcomeUse{}}
	if p.Answer != nil {
		sum := sha256.Sum256([]byte(*p.Answer))
		o.AnswerSHA256 = sum[:]
		// The answer is attributed to every included entry, those hidden
		// from the writer's role too: readers filter, the row keeps all.
		all := pk.Records
		if !agent.SeesAllRoles() {
			err := s.store.Read(ctx, func(db store.DB) error {
				var err error
				all, err = db.PacketRecordList(ctx, proj, packetID)
				return err
			})
			if err != nil {
				return nil, err
			}
		}
		o.Used = Used(pk.Rendered, *p.Answer, all)
	}
	return &Draft{agent: agent, outcome: o, shown: pk.Records, scopes: scopesOf(pk)}, nil
}

// Record is Prepare and RecordTx in a transaction of its own.
func (s *Service) Record(ctx context.Context, agent *auth.Agent, proj, packetID string, p Params) (*store.Outcome, error) {
	d, err := s.Prepare(ctx, agent, proj, packetID, p)
	if err != nil {
		return nil, err
	}
	var out *store.Outcome
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		out, err = s.RecordTx(ctx, tx, d)
		return err
	})
	return out, err
}

// RecordTx writes a prepared outcome inside the caller's transaction: the
// project must take writes (410 when archived), and the packet's outcomes
// are counted under its lock, so that concurrent writers never take it
// past MaxPerPacket. It answers the outcome as its writer may see it.
func (s *Service) RecordTx(ctx context.Context, tx *store.Tx, d *Draft) (*store.Outcome, error) {
	o := d.outcome
	if err := s.projects.AuthorizeIn(ctx, tx.DB, d.agent, o.Project, auth.ReadOnly); err != nil {
		return nil, err
	}
	if err := s.projects.Writable(ctx, tx, o.Project); err != nil {
		return nil, err
	}
	if err := tx.OutcomeLockPacket(ctx, o.Project, o.PacketID); err != nil {
		return nil, err
	}
	n, err := tx.OutcomeCount(ctx, o.Project, o.PacketID)
	if err != nil {
		return nil, err
	}
	if n >= MaxPerPacket {
		return nil, fmt.Errorf("%w: packet %s has %d outcomes, the most a packet may have", fault.ErrConflict, o.PacketID, MaxPerPacket)
	}
	o.ID, o.Seq = ident.New("out"), n+1
	stored, err := tx.OutcomeInsert(ctx, o)
	if err != nil {
		if errors.Is(err, fault.ErrNotFound) {
			return nil, fmt.Errorf("%w: %s", packet.ErrNotFound, o.PacketID)
		}
		return nil, fmt.Errorf("record outcome: %w", err)
	}
	if err := tx.OutcomeCountersAdd(ctx, o.PacketID, o.Status, d.scopes); err != nil {
		return nil, fmt.Errorf("count outcome: %w", err)
	}
	stored.Used = shownUses(stored.Used, d.shown)
	return &stored, nil
}

// MinSentenceWords is the fewest words a sentence of an answer has for
// Used to look for it on its own: shorter ones ("Yes.", "Thanks!") are
// found everywhere and say nothing.
const MinSentenceWords = 5

// Used is which included entries of a packet an answer used: every record
// with a span that a match in the rendered text overlaps, in record order,
// with its best match's similarity (rounded to three decimals, so that the
// same answer always stores the same bytes) and kind. The matches are
// attribute.Find's, as the attribute endpoint finds a copied text: of the
// whole answer, and of each of its sentences of MinSentenceWords words or
// more, since an answer quotes a sentence of its context among words of
// its own (a sentence found as such has similarity 1). The rendered text
// is prepared once for all of them: its words and their index are built
// once, not once a sentence.
func Used(rendered, answer string, records []ctxtype.Record) []store.OutcomeUse {
	out := []store.OutcomeUse{}
	prompt := attribute.Prepare(rendered)
	matches := prompt.Find(answer)
	for _, sentence := range sentences(answer) {
		for _, m := range prompt.Find(sentence) {
			if m.Kind != attribute.Passage {
				matches = append(matches, m)
			}
		}
	}
	if len(matches) == 0 {
		return out
	}
	for _, r := range records {
		if r.Decision != ctxtype.Included || r.Span == nil {
			continue
		}
		best := -1
		for i, m := range matches {
			if m.End > r.Span.Start && m.Start < r.Span.End && (best < 0 || m.Similarity > matches[best].Similarity) {
				best = i
			}
		}
		if best < 0 {
			continue
		}
		u := store.OutcomeUse{Subject: r.SubjectKind, Key: r.SubjectKey,
			Similarity: math.Round(matches[best].Similarity*1000) / 1000, Match: matches[best].Kind}
		if r.SubjectKind == ctxtype.SubjectItem {
			u.Project, u.Version = r.SubjectProject, r.SubjectVersion
		}
		out = append(out, u)
	}
	return out
}

// shownUses keeps the uses whose records are among those shown to the
// viewer: an entry hidden from its role never shows through an outcome.
func shownUses(uses []store.OutcomeUse, shown []ctxtype.Record) []store.OutcomeUse {
	type id struct {
		subject, project, key string
		version               int
	}
	seen := map[id]bool{}
	for _, r := range shown {
		if r.Decision != ctxtype.Included {
			continue
		}
		k := id{r.SubjectKind, "", r.SubjectKey, 0}
		if r.SubjectKind == ctxtype.SubjectItem {
			k.project, k.version = r.SubjectProject, r.SubjectVersion
		}
		seen[k] = true
	}
	out := make([]store.OutcomeUse, 0, len(uses))
	for _, u := range uses {
		if seen[id{u.Subject, u.Project, u.Key, u.Version}] {
			out = append(out, u)
		}
	}
	return out
}

// sentences splits an answer at sentence ends and line breaks, keeping the
// pieces of MinSentenceWords words or more.
func sentences(answer string) []string {
	var out []string
	start := 0
	flush := func(end int) {
		if piece := strings.TrimSpace(answer[start:end]); len(strings.Fields(piece)) >= MinSentenceWords {
			out = append(out, piece)
		}
		start = end
	}
	for i := 0; i < len(answer); i++ {
		switch answer[i] {
		case '\n':
			flush(i + 1)
		case '.', '!', '?':
			if i+1 == len(answer) || answer[i+1] == ' ' || answer[i+1] == '\n' {
				flush(i + 1)
			}
		}
	}
	flush(len(answer))
	return out
}
