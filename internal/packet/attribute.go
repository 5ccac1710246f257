package packet

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/contextd/contextd/internal/attribute"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/limits"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// withheldSpans are the spans of the text whose records the caller may no
// longer see (all the packet's records, less those shown): attribute
// reports them as withheld, without their subject, instead of passing them
// off as scaffolding.
func withheldSpans(all, shown []ctxtype.Record) []ctxtype.Span {
	seen := map[ctxtype.Span]bool{}
	for _, r := range shown {
		if r.Span != nil {
			seen[*r.Span] = true
		}
	}
	var out []ctxtype.Span
	for _, r := range all {
		if r.Span != nil && !seen[*r.Span] {
			seen[*r.Span] = true
			out = append(out, *r.Span)
		}
	}
	return out
}

// Match is one range of the rendered text and what it came from.
type Match struct {
	Start, End int
	// Kind is how the text was found (attribute.Exact, Normalized or
	// Passage), Similarity its share of the text asked about.
	Kind       string
	Similarity float64
	Records    []ctxtype.Record
	// Withheld are the spans over the range whose records the caller may
	// no longer see (an item hidden from its role since).
	Withheld    []ctxtype.Span
	Scaffolding []ctxtype.Span // the parts of the range no record covers
}

// AttributeParams names the text to explain: every occurrence of Text, or
// the byte range [Start, End).
type AttributeParams struct {
	Text       *string
	Start, End *int
}

// Attribute says which records each occurrence of a text (or a byte range)
// of the rendered packet came from, and which parts are scaffolding.
func (s *Service) Attribute(ctx context.Context, agent *auth.Agent, proj, id string, ap AttributeParams) ([]Match, error) {
	_, ms, err := s.attribute(ctx, agent, proj, id, ap)
	return ms, err
}

// attribute is Attribute, with the packet it read. The packet and, for an
// agent that does not see every role, all its records (to tell withheld
// spans from scaffolding) are read in one read of history, through the
// store's reader, so that both come from the same database.
func (s *Service) attribute(ctx context.Context, agent *auth.Agent, proj, id string, ap AttributeParams) (*Packet, []Match, error) {
	var all []ctxtype.Record
	p, err := s.read(ctx, agent, proj, id, func(db store.DB, _ *Packet) error {
		if agent.SeesAllRoles() {
			return nil
		}
		var err error
		all, err = db.PacketRecordList(ctx, proj, id)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	var found []attribute.Match
	switch {
	case ap.Text != nil && (ap.Start != nil || ap.End != nil):
		return nil, nil, validation.One("", "invalid", "give either text or start and end, not both")
	case ap.Text != nil:
		if *ap.Text == "" {
			return nil, nil, validation.One("/text", "required", "text must not be empty")
		}
		var errs validation.List
		limits.Bytes(&errs, "/text", len(*ap.Text), limits.Get().Message)
		if err := errs.Err(); err != nil {
			return nil, nil, err
		}
		found = attribute.Find(p.Rendered, *ap.Text)
		if len(found) == 0 {
			return nil, nil, &TextNotFound{PacketID: id}
		}
	case ap.Start != nil && ap.End != nil:
		if *ap.Start < 0 || *ap.End > len(p.Rendered) || *ap.Start >= *ap.End {
			return nil, nil, validation.One("/start", "range", "need 0 <= start < end <= %d (the rendered length in bytes)", len(p.Rendered))
		}
		if !utf8.RuneStart(p.Rendered[*ap.Start]) || (*ap.End < len(p.Rendered) && !utf8.RuneStart(p.Rendered[*ap.End])) {
			return nil, nil, validation.One("/start", "range", "start and end must not cut a UTF-8 character")
		}
		found = []attribute.Match{{Start: *ap.Start, End: *ap.End, Kind: attribute.Exact, Similarity: 1}}
	default:
		return nil, nil, validation.One("/text", "required", "give text, or start and end")
	}
	withheld := withheldSpans(all, p.Records)
	var out []Match
	for _, f := range found {
		rg := [2]int{f.Start, f.End}
		m := Match{Start: rg[0], End: rg[1], Kind: f.Kind, Similarity: f.Similarity, Records: []ctxtype.Record{}, Scaffolding: []ctxtype.Span{}}
		covered := make([]bool, rg[1]-rg[0])
		cover := func(sp ctxtype.Span) bool {
			if sp.End <= rg[0] || sp.Start >= rg[1] {
				return false
			}
			for i := max(sp.Start, rg[0]); i < min(sp.End, rg[1]); i++ {
				covered[i-rg[0]] = true
			}
			return true
		}
		for _, r := range p.Records {
			if r.Span != nil && cover(*r.Span) {
				m.Records = append(m.Records, r)
			}
		}
		for _, sp := range withheld {
			if cover(sp) {
				m.Withheld = append(m.Withheld, sp)
			}
		}
		for i := 0; i < len(covered); {
			if covered[i] {
				i++
				continue
			}
			j := i
			for j < len(covered) && !covered[j] {
				j++
			}
			m.Scaffolding = append(m.Scaffolding, ctxtype.Span{Start: rg[0] + i, End: rg[0] + j})
			i = j
		}
		out = append(out, m)
	}
	return p, out, nil
}

// TaskMatch is the best match of a text in one packet of a task.
type TaskMatch struct {
	PacketID  string
	CreatedAt time.Time
	Text      string // the matched text of the packet
	Match
}

// MaxTaskPackets is how many of a task's packets, newest first, a task
// attribute looks through.
const MaxTaskPackets = 100

// AttributeTask looks for text in every packet of a task that the agent may
// open (its newest MaxTaskPackets), and answers each packet's best match,
// best first (similarity, then the longer match), then newest first.
func (s *Service) AttributeTask(ctx context.Context, agent *auth.Agent, proj, taskID, text string) ([]TaskMatch, error) {
	if strings.TrimSpace(taskID) == "" {
		return nil, validation.One("task_id", "required", "task_id is required")
	}
	ps, _, err := s.List(ctx, agent, proj, ListParams{TaskID: taskID, Limit: MaxTaskPackets})
	if err != nil {
		return nil, err
	}
	out := []TaskMatch{}
	for _, sum := range ps {
		p, ms, err := s.attribute(ctx, agent, proj, sum.ID, AttributeParams{Text: &text})
		var tnf *TextNotFound
		switch {
		case errors.As(err, &tnf):
			continue
		case err != nil:
			return nil, err
		}
		best := ms[0]
		for _, m := range ms[1:] {
			if m.Similarity > best.Similarity {
				best = m
			}
		}
		out = append(out, TaskMatch{PacketID: sum.ID, CreatedAt: sum.CreatedAt, Text: p.Rendered[best.Start:best.End], Match: best})
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Similarity != b.Similarity {
			return a.Similarity > b.Similarity
		}
		return a.End-a.Start > b.End-b.Start
	})
	return out, nil
}

// TextNotFound is an attribute whose text the packet's prompt does not
// hold, not even in part: 404 with reason text_not_found (the packet
// exists).
type TextNotFound struct{ PacketID string }

func (e *TextNotFound) Error() string {
	return fmt.Sprintf("the text was not found in packet %s, not even %d consecutive words of it", e.PacketID, attribute.MinPassage)
}

// Is makes a TextNotFound a not-found.
func (e *TextNotFound) Is(target error) bool { return target == fault.ErrNotFound }
