package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// The operations of --only outcomes.
const (
	OpOutcomeWrite = "outcome_write"
	OpSuspects     = "suspects"
	OpLedgerItem   = "ledger_item"
	OpLedgerPage   = "ledger_page"
)

// The shape of --only outcomes: answers of outcomeAnswerSize bytes, and at
// most outcomeCap outcomes a packet (contextd allows 100), so that a long
// load moves on to a new packet instead of meeting the limit.
const (
	outcomeAnswerSize = 2048
	outcomeCap        = 90
)

// outcomeStatuses are the statuses outcomes take in turn.
var outcomeStatuses = []string{"success", "failure", "partial"}

// OutcomesReport is --only outcomes: the packets assembled before the load
// and the outcomes recorded on half of them, then each operation's figures.
type OutcomesReport struct {
	Packets  int   `json:"packets"`  // assembled before the load, by the workers' agents
	Recorded int64 `json:"recorded"` // outcomes recorded on half of them before the load
	Failed   int64 `json:"failed"`   // of which failures and partials: the suspects' packets
	// AnswerBytes is the size of the answers written (a few bytes less
	// where a quote's character would be cut); UsedPerAnswer the mean
	// number of entries contextd attributed the load's answers to.
	AnswerBytes   int     `json:"answer_bytes"`
	UsedPerAnswer float64 `json:"used_per_answer"`
	// Ops are the operations' figures, in outcomeOps order.
	Ops []NamedOpStats `json:"ops"`
}

// NamedOpStats is an operation's figures with its name.
type NamedOpStats struct {
	Op string `json:"op"`
	OpStats
}

// outcomePacket is a packet of a worker's agent, with the answer outcomes
// on it carry (made before the load, so no client work is timed) and the
// items it included, for operations about an item.
type outcomePacket struct {
	project, id string
	answer      string
	entries     []entryRef
	outcomes    int // outcomes written on it by this run
}

// outcomeSet is one worker's packets: fresh ones (no outcome before the
// load) take outcome_write's outcomes in turn; failed ones (a failure or
// partial before the load) are suspects' subjects.
type outcomeSet struct {
	fresh, failed []*outcomePacket
	// turn counts the worker's calls (the operations take turns), and
	// nextFresh, nextFailed and writes each operation's own.
	turn, nextFresh, nextFailed, writes int
	// used is the entries the answers of the successful writes were
	// attributed to, and written those writes.
	used, written int64
}

// outcomeCall is one request of an operation, made before the clock
// starts; check judges its answer after the clock stops.
type outcomeCall struct {
	method, path string
	body         []byte
	check        func(raw []byte) error
}

// outcomeOp is an operation of --only outcomes: next makes worker wk's
// next call from its packets. Another operation is one more function of
// this shape, and one more row of outcomeOps.
type outcomeOp struct {
	name string
	next func(ctx context.Context, wk *worker, set *outcomeSet) (outcomeCall, error)
}

// outcomeOps are the operations the workers take in turn. Another one is
// a name beside OpOutcomeWrite's, a function of outcomeOp.next's shape (a
// packet's items are in its entries) and one more row here; the load, the
// report and the table follow.
func (r *runner) outcomeOps() []outcomeOp {
	return []outcomeOp{
		{OpOutcomeWrite, r.outcomeWrite},
		{OpSuspects, r.outcomeSuspects},
		{OpLedgerItem, r.ledgerItem},
		{OpLedgerPage, r.ledgerPage},
	}
}

// runOutcomes seeds (or reuses) the default corpus, has every worker's
// agent assemble its packets and record outcomes on half of them, then
// loads the operations of outcomeOps in turn for --duration. It has no
// floor: the targets are latencies.
func (r *runner) runOutcomes(ctx context.Context) (*ModeResult, error) {
	r.setLayers()
	if err := r.seed(ctx); err != nil {
		return nil, err
	}
	if r.cfg.DatabaseURL != "" {
		pool, err := openPool(ctx, r.cfg.DatabaseURL, 1, nil)
		if err != nil {
			return nil, err
		}
		err = r.settle(ctx, pool)
		pool.Close()
		if err != nil {
			return nil, err
		}
	}
	if err := r.createAgents(ctx); err != nil {
		return nil, err
	}
	rep := &OutcomesReport{AnswerBytes: outcomeAnswerSize}
	sets, err := r.outcomeSets(ctx, rep)
	if err != nil {
		return nil, err
	}
	ops := r.outcomeOps()
	r.progressOps = make([]string, len(ops))
	for i, op := range ops {
		r.progressOps[i] = op.name
	}
	phases, walls, _, err := r.phased(ctx, 1, false, func(ctx context.Context, _ string, w int, deadline time.Time) {
		wk, set := r.workers[w], sets[w]
		for ctx.Err() == nil && time.Now().Before(deadline) {
			op := ops[set.turn%len(ops)]
			set.turn++
			r.outcomeStep(ctx, wk, set, op)
		}
	})
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		rep.Ops = append(rep.Ops, NamedOpStats{op.name, r.rec.stats(op.name, walls["contextd"])})
	}
	var used, writes int64
	for _, s := range sets {
		used, writes = used+s.used, writes+s.written
	}
	if writes > 0 {
		rep.UsedPerAnswer = round(float64(used)/float64(writes), 1)
	}
	return &ModeResult{Outcomes: rep, Phases: phases,
		Note: "the operations alternate on every client; ops/s is each one's calls over the load's wall time; no floor"}, nil
}

// outcomeStep makes one call of op and records it: only the request and
// its answer are timed.
func (r *runner) outcomeStep(ctx context.Context, wk *worker, set *outcomeSet, op outcomeOp) {
	c, err := op.next(ctx, wk, set)
	if err != nil {
		r.rec.add(op.name, 0, err)
		return
	}
	var body any
	if c.body != nil {
		body = c.body
	}
	start := time.Now()
	raw, _, err := r.c.do(ctx, c.method, c.path, wk.key, body)
	took := time.Since(start)
	if err == nil && c.check != nil {
		err = c.check(raw)
	}
	r.rec.add(op.name, took, err)
}

// outcomeWrite is outcome_write: an outcome with a 2 KB answer on the
// worker's next fresh packet, the statuses in turn.
func (r *runner) outcomeWrite(ctx context.Context, wk *worker, set *outcomeSet) (outcomeCall, error) {
	p, err := r.nextFresh(ctx, wk, set)
	if err != nil {
		return outcomeCall{}, err
	}
	p.outcomes++
	status := outcomeStatuses[set.writes%len(outcomeStatuses)]
	set.writes++
	body, err := json.Marshal(map[string]string{"status": status, "source": "evaluator", "answer": p.answer})
	if err != nil {
		return outcomeCall{}, err
	}
	return outcomeCall{method: http.MethodPost, path: "/v1/projects/" + p.project + "/packets/" + p.id + "/outcomes", body: body,
		check: func(raw []byte) error {
			var o struct {
				ID   string            `json:"id"`
				Used []json.RawMessage `json:"used"`
			}
			if err := json.Unmarshal(raw, &o); err != nil || o.ID == "" {
				return fmt.Errorf("outcome answer without id: %.200s", raw)
			}
			set.used += int64(len(o.Used))
			set.written++
			return nil
		}}, nil
}

// outcomeSuspects is suspects: the suspects of one of the worker's failed
// packets, in turn.
func (r *runner) outcomeSuspects(_ context.Context, _ *worker, set *outcomeSet) (outcomeCall, error) {
	p := set.failed[set.nextFailed%len(set.failed)]
	set.nextFailed++
	return outcomeCall{method: http.MethodGet, path: "/v1/projects/" + p.project + "/packets/" + p.id + "/suspects",
		check: func(raw []byte) error {
			var s struct {
				Suspects []json.RawMessage `json:"suspects"`
			}
			if err := json.Unmarshal(raw, &s); err != nil || len(s.Suspects) == 0 {
				return fmt.Errorf("no suspects of failed packet %s: %.200s", p.id, raw)
			}
			return nil
		}}, nil
}

// ledgerItem is ledger_item: the ledger of an item one of the worker's
// failed packets included, in turn (a _shared item's in the packet's
// project).
func (r *runner) ledgerItem(_ context.Context, _ *worker, set *outcomeSet) (outcomeCall, error) {
	p := set.failed[set.nextFailed%len(set.failed)]
	set.nextFailed++
	if len(p.entries) == 0 {
		return outcomeCall{}, fmt.Errorf("packet %s included no item", p.id)
	}
	e := p.entries[set.turn%len(p.entries)]
	path := "/v1/projects/" + e.project + "/items/" + e.key + "/ledger"
	if e.project != p.project {
		path += "?project=" + p.project
	}
	return outcomeCall{method: http.MethodGet, path: path, check: func(raw []byte) error {
		var l struct {
			Totals struct {
				Included int64 `json:"included"`
			} `json:"totals"`
		}
		if err := json.Unmarshal(raw, &l); err != nil || l.Totals.Included == 0 {
			return fmt.Errorf("ledger of %s/%s counts no packet that included it: %.200s", e.project, e.key, raw)
		}
		return nil
	}}, nil
}

// ledgerPage is ledger_page: the first page (100 items) of a bench
// project's ledger, the three orders in turn.
func (r *runner) ledgerPage(_ context.Context, wk *worker, set *outcomeSet) (outcomeCall, error) {
	sort := []string{"failure_rate", "tokens", "unused"}[set.turn%3]
	project := r.projects[wk.rng.IntN(len(r.projects))]
	return outcomeCall{method: http.MethodGet, path: "/v1/projects/" + project + "/ledger?sort=" + sort, check: func(raw []byte) error {
		var l struct {
			Data []json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(raw, &l); err != nil || len(l.Data) == 0 {
			return fmt.Errorf("empty ledger of %s: %.200s", project, raw)
		}
		return nil
	}}, nil
}

// nextFresh is the worker's next fresh packet with room for an outcome;
// when every one has outcomeCap, the worker assembles another (untimed).
func (r *runner) nextFresh(ctx context.Context, wk *worker, set *outcomeSet) (*outcomePacket, error) {
	for range set.fresh {
		p := set.fresh[set.nextFresh%len(set.fresh)]
		set.nextFresh++
		if p.outcomes < outcomeCap {
			return p, nil
		}
	}
	p, err := r.outcomePacket(ctx, wk)
	if err != nil {
		return nil, err
	}
	set.fresh = append(set.fresh, p)
	return p, nil
}

// outcomeSets has every worker's agent assemble its share of
// --outcome-packets (at least 4) and record an outcome on every other one:
// success, failure and partial in turn, three in four with an answer.
func (r *runner) outcomeSets(ctx context.Context, rep *OutcomesReport) ([]*outcomeSet, error) {
	per := max(4, (r.cfg.OutcomePackets+r.cfg.Concurrency-1)/r.cfg.Concurrency)
	rep.Packets = per * r.cfg.Concurrency
	sets := make([]*outcomeSet, len(r.workers))
	bar := newBarOf(r.cfg.Progress, "assembling packets and outcomes", "packets", rep.Packets)
	var done, recorded, failed atomic.Int64
	g, gctx := newGroup(ctx)
	for w, wk := range r.workers {
		set := &outcomeSet{}
		sets[w] = set
		g.Go(func() error {
			for i := range per {
				p, err := r.outcomePacket(gctx, wk)
				if err != nil {
					return err
				}
				bar.set(int(done.Add(1)))
				if i%2 == 0 {
					set.fresh = append(set.fresh, p)
					continue
				}
				k := i / 2
				status := outcomeStatuses[k%len(outcomeStatuses)]
				body := map[string]string{"status": status, "source": "evaluator"}
				if k%4 != 3 {
					body["answer"] = p.answer
				}
				path := "/v1/projects/" + p.project + "/packets/" + p.id + "/outcomes"
				if err := r.c.call(gctx, http.MethodPost, path, wk.key, body, nil); err != nil {
					return fmt.Errorf("record an outcome: %w", err)
				}
				p.outcomes++
				recorded.Add(1)
				if status != "success" {
					failed.Add(1)
					set.failed = append(set.failed, p)
				}
			}
			return nil
		})
	}
	err := g.Wait()
	bar.finish()
	rep.Recorded, rep.Failed = recorded.Load(), failed.Load()
	return sets, err
}

// outcomePacket has the worker's agent assemble a packet in one of the
// bench projects, as the workload does, and makes the answer its outcomes
// carry.
func (r *runner) outcomePacket(ctx context.Context, wk *worker) (*outcomePacket, error) {
	wk.n++
	project := r.projects[wk.rng.IntN(len(r.projects))]
	var pa packetAnswer
	if err := r.c.call(ctx, http.MethodPost, "/v1/projects/"+project+"/packets", wk.key, r.request(wk), &pa); err != nil {
		return nil, fmt.Errorf("assemble a packet: %w", err)
	}
	p := &outcomePacket{project: project, id: pa.PacketID, answer: r.answerOf(pa.Rendered, wk.rng)}
	for _, s := range pa.Sections {
		for _, e := range s.Entries {
			if e.Subject == "item" && e.Decision == "included" {
				p.entries = append(p.entries, entryRefOf(project, e.Project, e.Key))
			}
		}
	}
	return p, nil
}

// answerOf is a model's answer of outcomeAnswerSize bytes to a packet: its
// rendered text's sentences (of five words or more) quoted in turn with
// sentences of its own words, as an answer quotes its context, so that
// contextd attributes it to the spans of the entries it quotes.
func (r *runner) answerOf(rendered string, rng *rand.Rand) string {
	var quotes []string
	for _, line := range strings.Split(rendered, "\n") {
		for _, s := range strings.SplitAfter(line, ". ") {
			if s = strings.TrimSpace(s); len(strings.Fields(s)) >= 5 && len(s) < outcomeAnswerSize/4 {
				quotes = append(quotes, s)
			}
		}
	}
	var b strings.Builder
	for b.Len() < outcomeAnswerSize {
		if len(quotes) > 0 {
			b.WriteString(quotes[rng.IntN(len(quotes))])
			b.WriteByte(' ')
		}
		b.WriteString(r.corpus.Text(rng, 80+rng.IntN(120)))
		b.WriteByte(' ')
	}
	out, end := b.String(), outcomeAnswerSize
	for end < len(out) && !utf8.RuneStart(out[end]) {
		end-- // a quote's character cut in two: the answer stays UTF-8
	}
	return out[:end]
}

func (rep *OutcomesReport) writeTable(w io.Writer) {
	fmt.Fprintf(w, "outcomes       %d packets assembled, outcomes on %d of them (%d failed or partial); answers of %d bytes, %.1f entries used each\n",
		rep.Packets, rep.Recorded, rep.Failed, rep.AnswerBytes, rep.UsedPerAnswer)
	fmt.Fprintf(w, "%-14s %8s %9s %9s %9s %9s %7s\n", "operation", "ops", "ops/s", "p50 ms", "p95 ms", "p99 ms", "errors")
	for _, op := range rep.Ops {
		writeStatsRow(w, op.Op, &op.OpStats)
	}
}
