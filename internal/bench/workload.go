package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"
)

// worker is one agent of the workload, with its own random stream and the
// last packet it assembled (the subject of its why and injections calls).
type worker struct {
	agent
	n      int
	rng    *rand.Rand
	recent *recentPacket
}

type recentPacket struct {
	project, id string
	entries     []entryRef
}

type entryRef struct{ project, key string }

// entryRefOf names an item entry of a packet of project: an entry names its
// layer only when it is not the packet's own (_shared).
func entryRefOf(packetProject, entryProject, key string) entryRef {
	if entryProject == "" {
		entryProject = packetProject
	}
	return entryRef{entryProject, key}
}

// The mixed workload's shares, in percent: why and injections split the 10%.
const (
	shareAssemble   = 70
	sharePutItem    = 15
	shareWhy        = 5
	shareInjections = 5
	// the remaining 5%: handoff create and accept
)

// work runs worker w's calls against system until deadline.
func (r *runner) work(ctx context.Context, system string, w int, deadline time.Time) {
	wk := r.workers[w]
	for ctx.Err() == nil && time.Now().Before(deadline) {
		wk.n++
		project := r.projects[wk.rng.IntN(len(r.projects))]
		if system == OpFloor {
			start := time.Now()
			err := r.floor.assemble(ctx, project, wk.role, r.floorQuery(wk.rng), r.renderedSize())
			r.rec.add(OpFloor, time.Since(start), err)
			continue
		}
		n := 0 // assembly, until there is a packet to ask about
		if r.cfg.Only != OpAssemble && wk.recent != nil {
			n = wk.rng.IntN(100)
		}
		switch {
		case n < shareAssemble:
			r.assemble(ctx, wk, project)
		case n < shareAssemble+sharePutItem:
			r.putItem(ctx, wk, project)
		case n < shareAssemble+sharePutItem+shareWhy:
			r.why(ctx, wk)
		case n < shareAssemble+sharePutItem+shareWhy+shareInjections:
			r.injections(ctx, wk)
		default:
			r.handoff(ctx, wk, project)
		}
	}
}

// renderedSize is the mean size of contextd's rendered texts so far
// (~60 KB before the first one).
func (r *runner) renderedSize() int {
	if n := r.answers.Load(); n > 0 {
		return int(r.renderedBytes.Load() / n)
	}
	return 60000
}

func (r *runner) floorQuery(rng *rand.Rand) string { return r.corpus.Words(rng, 3+rng.IntN(3)) }

type message struct {
	Role    string `json:"role"`
	Author  string `json:"author"`
	Content string `json:"content"`
}

type toolResult struct {
	Tool    string `json:"tool"`
	Status  string `json:"status"`
	Content string `json:"content"`
}

type packetTask struct {
	TaskID    string `json:"task_id"`
	Objective string `json:"objective"`
}

type packetRequest struct {
	TargetRole  string       `json:"target_role"`
	Task        packetTask   `json:"task"`
	TokenBudget int          `json:"token_budget,omitempty"` // 0: the role's policy's (--role-policy)
	History     []message    `json:"history"`
	ToolResults []toolResult `json:"tool_results"`
	Query       string       `json:"query"`
}

// packetAnswer is the part of a Packet the workload reads.
type packetAnswer struct {
	PacketID string `json:"packet_id"`
	Rendered string `json:"rendered"`
	Sections []struct {
		Entries []struct {
			Subject  string `json:"subject"`
			Project  string `json:"project"`
			Key      string `json:"key"`
			Decision string `json:"decision"`
		} `json:"entries"`
	} `json:"sections"`
}

// request is a packet request of the workload: a task, two messages from a
// person and one from an agent, one tool result and a query of a few words.
func (r *runner) request(wk *worker) packetRequest {
	rng, c := wk.rng, r.corpus
	return packetRequest{
		TargetRole:  wk.role,
		Task:        packetTask{TaskID: fmt.Sprintf("bench-%s-%s-%d", r.runID, wk.id, wk.n/50), Objective: c.Text(rng, 60+rng.IntN(80))},
		TokenBudget: r.requestBudget(),
		History: []message{
			{Role: "user", Author: "person", Content: c.Text(rng, 150+rng.IntN(200))},
			{Role: "assistant", Author: "agent", Content: c.Text(rng, 200+rng.IntN(300))},
			{Role: "user", Author: "person", Content: c.Text(rng, 80+rng.IntN(120))},
		},
		ToolResults: []toolResult{{Tool: Tools[rng.IntN(len(Tools))], Status: "ok", Content: c.Text(rng, 100+rng.IntN(200))}},
		Query:       c.Words(rng, 3+rng.IntN(3)),
	}
}

func (r *runner) assemble(ctx context.Context, wk *worker, project string) {
	req := r.request(wk)
	start := time.Now()
	raw, _, err := r.c.do(ctx, http.MethodPost, "/v1/projects/"+project+"/packets", wk.key, req)
	took := time.Since(start)
	whole := wk.recent == nil || wk.n%decodeEvery == 0
	var p packetAnswer
	if err == nil {
		if whole {
			err = json.Unmarshal(raw, &p)
		} else {
			p.PacketID, err = packetIDOf(raw)
		}
		if err == nil && p.PacketID == "" {
			err = fmt.Errorf("assembly answer without packet_id: %.200s", raw)
		}
	}
	r.rec.add(OpAssemble, took, err)
	if err != nil {
		return
	}
	r.samples.add(packetRef{project, p.PacketID})
	if !whole {
		return
	}
	r.answers.Add(1)
	r.answerBytes.Add(int64(len(raw)))
	r.renderedBytes.Add(int64(len(p.Rendered)))
	rp := &recentPacket{project: project, id: p.PacketID}
	for _, s := range p.Sections {
		for _, e := range s.Entries {
			if e.Subject == "item" {
				rp.entries = append(rp.entries, entryRefOf(project, e.Project, e.Key))
			}
		}
	}
	if len(rp.entries) > 0 {
		wk.recent = rp
	}
}

// decodeEvery: a worker decodes one assembly answer in decodeEvery whole
// (its entries for the why and injection calls, the sizes bench reports)
// and of the others reads the packet_id alone (packetIDOf). The load
// generator shares the server's cores; decoding every ~54 KB answer was
// ~8% of the process's CPU at 8 agents (json.Unmarshal scans and unquotes
// the whole rendered text), work a client on its own machine would not
// take from the server.
const decodeEvery = 8

// packetIDOf reads an answer's top-level packet_id and stops there: the
// keys before it (budget, created_at, excluded, ...) are small, and the
// rendered text and sections after it are not read. A malformed answer
// is an error, as in a whole decode.
func packetIDOf(raw []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", fmt.Errorf("assembly answer is not a JSON object: %.200s", raw)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", fmt.Errorf("assembly answer: %w", err)
		}
		if t == "packet_id" {
			var id string
			if err := dec.Decode(&id); err != nil {
				return "", fmt.Errorf("assembly answer's packet_id: %w", err)
			}
			return id, nil
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", fmt.Errorf("assembly answer: %w", err)
		}
	}
	return "", nil
}

// putItem rewrites one item of the project with new content (a new
// version), choosing one the worker's role may see.
func (r *runner) putItem(ctx context.Context, wk *worker, project string) {
	var items []Item
	for _, l := range r.layers {
		if l.project == project {
			items = l.items
		}
	}
	it := items[wk.rng.IntN(len(items))]
	for tries := 0; it.HiddenFrom(wk.role) && tries < 10; tries++ {
		it = items[wk.rng.IntN(len(items))]
	}
	key := it.Key
	it.Key = ""
	size := 200 + wk.rng.IntN(1801)
	if it.Template {
		const prefix = "In {{project}}: "
		it.Content = prefix + r.corpus.Text(wk.rng, size-len(prefix))
	} else {
		it.Content = r.corpus.Text(wk.rng, size)
	}
	start := time.Now()
	_, _, err := r.c.do(ctx, http.MethodPut, "/v1/projects/"+project+"/items/"+key, wk.key, it)
	r.rec.add(OpPutItem, time.Since(start), err)
}

func (r *runner) entry(wk *worker, projectLayer bool) (entryRef, bool) {
	es := wk.recent.entries
	for tries := 0; tries < 8; tries++ {
		e := es[wk.rng.IntN(len(es))]
		if !projectLayer || e.project == wk.recent.project {
			return e, true
		}
	}
	return es[0], !projectLayer
}

// why asks why the worker's last packet contained one of its items.
func (r *runner) why(ctx context.Context, wk *worker) {
	e, _ := r.entry(wk, false)
	path := "/v1/projects/" + wk.recent.project + "/packets/" + wk.recent.id + "/why?item=" + url.QueryEscape(e.key)
	if e.project == SharedProject {
		path += "&layer=shared"
	}
	start := time.Now()
	_, _, err := r.c.do(ctx, http.MethodGet, path, wk.key, nil)
	r.rec.add(OpWhy, time.Since(start), err)
}

// injections lists the packets that included an item of the last packet
// (a project-layer one when there is one).
func (r *runner) injections(ctx context.Context, wk *worker) {
	e, ok := r.entry(wk, true)
	if !ok {
		e.project = SharedProject
	}
	path := "/v1/projects/" + url.PathEscape(e.project) + "/items/" + e.key + "/injections"
	start := time.Now()
	_, _, err := r.c.do(ctx, http.MethodGet, path, wk.key, nil)
	r.rec.add(OpInjections, time.Since(start), err)
}

// handoff hands a task to another role and has an agent of that role
// accept it: one operation of two calls.
func (r *runner) handoff(ctx context.Context, wk *worker, project string) {
	target := Roles[wk.rng.IntN(len(Roles))]
	for target == wk.role {
		target = Roles[wk.rng.IntN(len(Roles))]
	}
	body := map[string]any{
		"task_id": fmt.Sprintf("bench-%s-h-%s-%d", r.runID, wk.id, wk.n),
		"intent":  "request_review",
		"target":  map[string]string{"role": target},
		"summary": r.corpus.Text(wk.rng, 80+wk.rng.IntN(200)),
		"deliverables": map[string]any{
			"patches": []string{fmt.Sprintf("patch-%d.diff", wk.n)},
		},
		"decisions": []string{r.corpus.Text(wk.rng, 60)},
	}
	if wk.recent != nil && wk.recent.project == project {
		body["packet_id"] = wk.recent.id
	}
	start := time.Now()
	var h struct {
		ID string `json:"id"`
	}
	err := r.c.call(ctx, http.MethodPost, "/v1/projects/"+project+"/handoffs", wk.key, body, &h)
	if err == nil {
		err = r.c.call(ctx, http.MethodPost, "/v1/projects/"+project+"/handoffs/"+h.ID+"/accept", r.accept[target].key, map[string]string{}, nil)
	}
	r.rec.add(OpHandoff, time.Since(start), err)
}
