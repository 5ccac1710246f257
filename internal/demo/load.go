package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	apiclient "github.com/contextd/contextd/api/client"
)

// loader plays a script against a server: as holds a client per agent
// (admin: the caller), packets and handoffs the ids of the names made.
type loader struct {
	cfg   Config
	s     *script
	admin *apiclient.Client
	as    map[string]*apiclient.Client

	agents     []Agent
	versions   int
	packets    map[string]*apiclient.Packet
	packetList []Packet
	handoffs   map[string]string
	handoffOrd []string
	redactions []Redaction
}

// load makes the agents, writes the items and plays the story.
func (l *loader) load(ctx context.Context) error {
	l.progress("%d agents", len(l.s.Agents))
	for _, a := range l.s.Agents {
		if err := l.agent(ctx, a); err != nil {
			return fmt.Errorf("agent %s: %w", a.Name, err)
		}
	}
	l.progress("%d item writes", len(l.s.Items))
	for _, it := range l.s.Items {
		if err := l.put(ctx, it.As, it.itemWrite); err != nil {
			return err
		}
	}
	l.progress("task %s: %d steps", l.s.Task, len(l.s.Story))
	for i := range l.s.Story {
		if err := l.step(ctx, &l.s.Story[i]); err != nil {
			return fmt.Errorf("step %d of the story (as %s): %w", i+1, l.s.Story[i].As, err)
		}
	}
	return nil
}

// agent makes an agent of the project alone, and a client with its key.
// Its name says the project, so that two demos' agents tell apart.
func (l *loader) agent(ctx context.Context, a agentSpec) error {
	var made apiclient.AgentWithKey
	res, err := l.admin.Raw().CreateAgent(ctx, &apiclient.CreateAgentParams{}, apiclient.AgentCreate{
		Name: fmt.Sprintf("%s (%s)", a.Name, l.cfg.Project), Role: a.Role, Permission: a.Permission, Projects: []string{l.cfg.Project},
	})
	if err := l.admin.ReadAnswer(res, err, &made); err != nil {
		return err
	}
	c, err := apiclient.New(l.admin.BaseURL(), made.Key, l.cfg.Options...)
	if err != nil {
		return err
	}
	l.as[a.As] = c
	l.agents = append(l.agents, Agent{ID: made.Id, Name: made.Name, Role: made.Role, Permission: made.Permission, Key: made.Key})
	return nil
}

func (l *loader) put(ctx context.Context, as string, w itemWrite) error {
	if _, err := l.as[as].PutItem(ctx, l.cfg.Project, w.Key, w.ItemWrite); err != nil {
		return fmt.Errorf("item %s (written by %s): %w", w.Key, as, err)
	}
	l.versions++
	return nil
}

// step does one step of the story.
func (l *loader) step(ctx context.Context, st *step) error {
	c := l.as[st.As]
	switch {
	case st.Put != nil:
		return l.put(ctx, st.As, *st.Put)
	case st.Packet != nil:
		return l.packet(ctx, c, st.Packet)
	case st.Handoff != nil:
		return l.handoff(ctx, c, st.Handoff)
	case st.Redact != nil:
		return l.redact(ctx, st.Redact)
	}
	verb, t := st.transition()
	id := l.handoffs[t.Handoff]
	var err error
	switch verb {
	case "accept":
		_, err = c.AcceptHandoff(ctx, l.cfg.Project, id, t.Reason)
	case "reject":
		_, err = c.RejectHandoff(ctx, l.cfg.Project, id, t.Reason)
	default:
		_, err = c.WithdrawHandoff(ctx, l.cfg.Project, id, t.Reason)
	}
	if err != nil {
		return fmt.Errorf("%s %s (%s): %w", verb, t.Handoff, id, err)
	}
	return nil
}

func (l *loader) packet(ctx context.Context, c *apiclient.Client, ps *packetStep) error {
	req := ps.Request
	if len(ps.Predecessors) > 0 {
		ids := make([]string, len(ps.Predecessors))
		for i, name := range ps.Predecessors {
			ids[i] = l.handoffs[name]
		}
		req.Predecessors = &ids
	}
	p, err := c.Assemble(ctx, l.cfg.Project, req)
	if err != nil {
		return fmt.Errorf("packet %s: %w", ps.Name, err)
	}
	l.packets[ps.Name] = p
	step := ""
	if req.Task != nil && req.Task.StepId != nil {
		step = *req.Task.StepId
	}
	l.packetList = append(l.packetList, Packet{Name: ps.Name, ID: p.PacketId, Role: p.TargetRole, Step: step})
	return nil
}

func (l *loader) handoff(ctx context.Context, c *apiclient.Client, hs *handoffStep) error {
	m := hs.Manifest
	if hs.Packet != "" {
		m.PacketId = &l.packets[hs.Packet].PacketId
	}
	if hs.ReworkOf != "" {
		id := l.handoffs[hs.ReworkOf]
		m.ReworkOf = &id
	}
	h, err := c.CreateHandoff(ctx, l.cfg.Project, m)
	if err != nil {
		return fmt.Errorf("handoff %s: %w", hs.Name, err)
	}
	l.handoffs[hs.Name] = h.Id
	l.handoffOrd = append(l.handoffOrd, hs.Name)
	return nil
}

// redactWait bounds how long the demo waits for a redaction to rewrite
// the packets that included the version (a handful here).
const redactWait = 2 * time.Minute

// redact redacts a version and waits until the packets that included it
// are rewritten, so that the demo's packets show the markers when it ends.
func (l *loader) redact(ctx context.Context, rs *redactStep) error {
	var r apiclient.Redaction
	res, err := l.admin.Raw().RedactItemVersion(ctx, l.cfg.Project, rs.Key, rs.Version, apiclient.RedactionRequest{Reason: rs.Reason})
	if err := l.admin.ReadAnswer(res, err, &r); err != nil {
		return fmt.Errorf("redact %s v%d: %w", rs.Key, rs.Version, err)
	}
	deadline := time.Now().Add(redactWait)
	for r.Status == "running" && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		res, err := l.admin.Raw().GetRedaction(ctx, l.cfg.Project, r.Id)
		if err := l.admin.ReadAnswer(res, err, &r); err != nil {
			return fmt.Errorf("redaction %s: %w", r.Id, err)
		}
	}
	if r.Status == "failed" {
		return fmt.Errorf("redaction %s of %s v%d failed: %s", r.Id, rs.Key, rs.Version, deref(r.Error))
	}
	l.redactions = append(l.redactions, Redaction{ID: r.Id, Key: rs.Key, Version: rs.Version, Status: string(r.Status)})
	return nil
}

// result reads back each handoff's status and counts the items.
func (l *loader) result(ctx context.Context) (*Result, error) {
	out := &Result{Project: l.cfg.Project, Task: l.s.Task, Versions: l.versions, Kinds: map[string]int{}, Triggers: map[string]int{},
		Agents: l.agents, Packets: l.packetList, Redactions: l.redactions,
		Try: Try{Packet: l.packets[l.s.Try.Packet].PacketId, Included: l.s.Try.Included, Excluded: l.s.Try.Excluded}}
	for _, w := range l.s.latest() {
		out.Items++
		out.Kinds[deref(w.Kind)]++
		out.Triggers[triggerName(w.Trigger)]++
		if w.Roles != nil {
			out.Hidden++
		}
	}
	for _, name := range l.handoffOrd {
		h, err := l.admin.Handoff(ctx, l.cfg.Project, l.handoffs[name])
		if err != nil {
			return nil, err
		}
		rework := ""
		for n, id := range l.handoffs {
			if h.ReworkOf != nil && *h.ReworkOf == id {
				rework = n
			}
		}
		out.Handoffs = append(out.Handoffs, Handoff{Name: name, ID: h.Id, SourceRole: deref(h.Source.Role), TargetRole: deref(h.Target.Role),
			Intent: h.Intent, Status: h.Status, ReworkOf: rework})
	}
	return out, nil
}

// latest is each key's last write, items and story together, by key.
func (s *script) latest() []apiclient.ItemWrite {
	last := map[string]apiclient.ItemWrite{}
	for _, it := range s.Items {
		last[it.Key] = it.ItemWrite
	}
	for _, st := range s.Story {
		if st.Put != nil {
			last[st.Put.Key] = st.Put.ItemWrite
		}
	}
	keys := make([]string, 0, len(last))
	for k := range last {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]apiclient.ItemWrite, len(keys))
	for i, k := range keys {
		out[i] = last[k]
	}
	return out
}

// triggerName names an item's trigger as the summary counts it.
func triggerName(t *apiclient.Trigger) string {
	switch {
	case t == nil, t.Always != nil && *t.Always:
		return "always"
	case t.Keywords != nil && t.Match != nil && *t.Match == "stem":
		return "keywords (stem)"
	case t.Keywords != nil:
		return "keywords"
	case t.Tool != nil:
		return "tool"
	case t.Relevance != nil && *t.Relevance:
		return "relevance"
	case t.PinnedOnly != nil && *t.PinnedOnly:
		return "pinned_only"
	}
	b, _ := json.Marshal(t)
	return string(b)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
