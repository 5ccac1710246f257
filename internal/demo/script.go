package demo

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"

	apiclient "github.com/contextd/contextd/api/client"
)

// supportJSON is the demo: a support desk, its agents, its items and the
// story of one task, as the API's own request bodies, so that the file
// reads like the requests it becomes.
//
//go:embed support.json
var supportJSON []byte

// admin is the name a step uses for the caller of the demo (an admin).
const admin = "admin"

// script is the demo as data: who the agents are, the items they write,
// then the story (packets, handoffs and their answers, a rewrite, a
// redaction) in the order it happens. Packets and handoffs have names
// (P1, H2) that later steps use for their ids.
type script struct {
	Description string      `json:"description"`
	Task        string      `json:"task"`
	Agents      []agentSpec `json:"agents"`
	Items       []itemSpec  `json:"items"`
	Story       []step      `json:"story"`
	Try         trySpec     `json:"try"`
}

// agentSpec is an agent; As is how the steps name it.
type agentSpec struct {
	As         string `json:"as"`
	Name       string `json:"name"`
	Role       string `json:"role"`
	Permission string `json:"permission"`
}

// itemWrite is one item write: a key and the PUT's body.
type itemWrite struct {
	Key string `json:"key"`
	apiclient.ItemWrite
}

// itemSpec is an item write and who writes it.
type itemSpec struct {
	As string `json:"as"`
	itemWrite
}

// step is one thing that happens, done by As: exactly one member is set.
type step struct {
	As       string          `json:"as"`
	Put      *itemWrite      `json:"put,omitempty"`
	Packet   *packetStep     `json:"packet,omitempty"`
	Handoff  *handoffStep    `json:"handoff,omitempty"`
	Accept   *transitionStep `json:"accept,omitempty"`
	Reject   *transitionStep `json:"reject,omitempty"`
	Withdraw *transitionStep `json:"withdraw,omitempty"`
	Redact   *redactStep     `json:"redact,omitempty"`
}

// packetStep assembles a packet; Predecessors name earlier handoffs.
type packetStep struct {
	Name         string                  `json:"name"`
	Predecessors []string                `json:"predecessors,omitempty"`
	Request      apiclient.PacketRequest `json:"request"`
}

// handoffStep creates a handoff; Packet and ReworkOf name an earlier
// packet and handoff.
type handoffStep struct {
	Name     string                  `json:"name"`
	Packet   string                  `json:"packet,omitempty"`
	ReworkOf string                  `json:"rework_of,omitempty"`
	Manifest apiclient.HandoffCreate `json:"manifest"`
}

// transitionStep accepts, rejects or withdraws a named handoff.
type transitionStep struct {
	Handoff string `json:"handoff"`
	Reason  string `json:"reason"`
}

// redactStep redacts one version of an item.
type redactStep struct {
	Key     string `json:"key"`
	Version int32  `json:"version"`
	Reason  string `json:"reason"`
}

// trySpec is what the demo suggests to look at: a packet, a key it
// included and one it excluded.
type trySpec struct {
	Packet   string `json:"packet"`
	Included string `json:"included"`
	Excluded string `json:"excluded"`
}

// parseScript reads a script strictly (an unknown member is an error, so
// a typo in the data cannot pass for a default) and checks its names.
func parseScript(b []byte) (*script, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s script
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("demo data: %w", err)
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("demo data: %w", err)
	}
	return &s, nil
}

// check makes sure that every name a step uses is defined before it, so
// that a broken script fails before anything is written.
func (s *script) check() error {
	who := map[string]bool{admin: true}
	for _, a := range s.Agents {
		if who[a.As] {
			return fmt.Errorf("agent %q twice", a.As)
		}
		who[a.As] = true
	}
	for _, it := range s.Items {
		if !who[it.As] {
			return fmt.Errorf("item %s: no writer %q", it.Key, it.As)
		}
	}
	n := names{packets: map[string]bool{}, handoffs: map[string]bool{}}
	for i, st := range s.Story {
		if !who[st.As] {
			return fmt.Errorf("step %d: no agent %q", i, st.As)
		}
		if c := st.actions(); c != 1 {
			return fmt.Errorf("step %d: %d actions, want exactly one", i, c)
		}
		if err := n.check(&st); err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
	}
	return known(n.packets, "packet", s.Try.Packet)
}

// names are the packets and handoffs the steps so far made.
type names struct{ packets, handoffs map[string]bool }

// check checks the names a step uses (made before) and makes (new).
func (n names) check(st *step) error {
	switch {
	case st.Packet != nil:
		for _, p := range st.Packet.Predecessors {
			if err := known(n.handoffs, "handoff", p); err != nil {
				return err
			}
		}
		return fresh(n.packets, "packet", st.Packet.Name)
	case st.Handoff != nil:
		if err := known(n.packets, "packet", st.Handoff.Packet); st.Handoff.Packet != "" && err != nil {
			return err
		}
		if err := known(n.handoffs, "handoff", st.Handoff.ReworkOf); st.Handoff.ReworkOf != "" && err != nil {
			return err
		}
		return fresh(n.handoffs, "handoff", st.Handoff.Name)
	}
	if _, t := st.transition(); t != nil {
		return known(n.handoffs, "handoff", t.Handoff)
	}
	return nil
}

func known(set map[string]bool, kind, name string) error {
	if !set[name] {
		return fmt.Errorf("%s %q is used before it is made", kind, name)
	}
	return nil
}

func fresh(set map[string]bool, kind, name string) error {
	if name == "" || set[name] {
		return fmt.Errorf("%s name %q is empty or taken", kind, name)
	}
	set[name] = true
	return nil
}

// actions counts the members of a step that are set.
func (st *step) actions() int {
	n := 0
	for _, set := range []bool{st.Put != nil, st.Packet != nil, st.Handoff != nil, st.Accept != nil, st.Reject != nil, st.Withdraw != nil, st.Redact != nil} {
		if set {
			n++
		}
	}
	return n
}

// transition is the step's accept, reject or withdraw, with its name.
func (st *step) transition() (string, *transitionStep) {
	switch {
	case st.Accept != nil:
		return "accept", st.Accept
	case st.Reject != nil:
		return "reject", st.Reject
	case st.Withdraw != nil:
		return "withdraw", st.Withdraw
	}
	return "", nil
}
