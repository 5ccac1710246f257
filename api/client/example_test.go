package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/contextd/contextd/api/client"
	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/evidence"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
)

// The examples call a real contextd server, started in-process on a
// PostgreSQL database of its own before they run.
var (
	serverURL string // the server's base URL
	adminKey  string // its first admin's key
	readerKey string // a read-only agent of role "reviewer" in every project
)

func TestMain(m *testing.M) { pgtest.MainWith(m, startServer) }

func startServer(tb testing.TB) {
	keys, err := evidence.ParseKey("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	if err != nil {
		tb.Fatal(err)
	}
	a := app.New(store.New(pgtest.New(tb), pgtest.AcquireTimeout), app.WithKeys(keys))
	ts := httptest.NewServer(server.New(server.Config{App: a}))
	tb.Cleanup(ts.Close)
	ctx := context.Background()
	if _, adminKey, err = a.Agents.Bootstrap(ctx); err != nil {
		tb.Fatal(err)
	}
	if _, readerKey, err = a.Agents.CreateLocal(ctx, auth.CreateParams{Name: "reader", Role: "reviewer", Permission: auth.ReadOnly, Projects: []string{auth.AllProjects}}); err != nil {
		tb.Fatal(err)
	}
	serverURL = ts.URL
}

// newProject is a client with the admin key and a project of its own.
func newProject(project string) *client.Client {
	c, err := client.New(serverURL, adminKey)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.PutProject(context.Background(), project, "an example"); err != nil {
		log.Fatal(err)
	}
	return c
}

// Connect, write an item and assemble the packet of a prompt that needs it.
func Example() {
	ctx := context.Background()
	c, err := client.New(serverURL, adminKey) // e.g. "http://127.0.0.1:8080", os.Getenv("CONTEXTD_KEY")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.PutProject(ctx, "acme", "the shop"); err != nil {
		log.Fatal(err)
	}
	item, err := c.PutItem(ctx, "acme", "refund.rules", client.ItemWrite{
		Content: "Refunds over 500 EUR need a manager.",
		Trigger: &client.Trigger{Keywords: &[]string{"refund"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("wrote", item.Key, "version", item.Version)

	p, err := c.Assemble(ctx, "acme", client.PacketRequest{
		TargetRole: "implementer",
		History:    &[]client.Message{client.UserMessage("Why did my refund of 600 EUR fail?")},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range p.Sections {
		for _, e := range s.Entries {
			fmt.Printf("%s: %s:%s (%s)\n", s.Name, e.Subject, e.Key, e.Rule)
		}
	}
	fmt.Print(p.Rendered)
	// Output:
	// wrote refund.rules version 1
	// Project Knowledge: item:refund.rules (keyword:"refund"@history[0])
	// # Context Packet
	// Project: acme | Role: implementer
	//
	// ## 5. Environment & Memory
	//
	// ### Project Knowledge
	// - Refunds over 500 EUR need a manager.
}

// Ask why a packet did or did not contain an item.
func ExampleClient_Why() {
	ctx := context.Background()
	c := newProject("why-example")
	for key, content := range map[string]string{"refund.rules": "Refunds over 500 EUR need a manager.", "deploy": "Deploys freeze on Fridays."} {
		trigger := strings.Split(key, ".")[0]
		if _, err := c.PutItem(ctx, "why-example", key, client.ItemWrite{Content: content, Trigger: &client.Trigger{Keywords: &[]string{trigger}}}); err != nil {
			log.Fatal(err)
		}
	}
	p, err := c.Assemble(ctx, "why-example", client.PacketRequest{
		TargetRole: "implementer",
		History:    &[]client.Message{client.UserMessage("my refund failed")},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, key := range []string{"refund.rules", "deploy"} {
		w, err := c.WhyItem(ctx, "why-example", p.PacketId, key)
		if err != nil {
			log.Fatal(err)
		}
		if w.Decision == "included" {
			fmt.Printf("%s: %s in %s by %s, %q\n", key, w.Decision, *w.Section, *w.Rule, p.Rendered[w.Span.Start:w.Span.End])
		} else {
			fmt.Printf("%s: %s (%s)\n", key, w.Decision, *w.Reason)
		}
	}
	// Output:
	// refund.rules: included in Project Knowledge by keyword:"refund"@history[0], "- Refunds over 500 EUR need a manager.\n"
	// deploy: not_candidate (not_triggered)
}

// Find which records a piece of the rendered prompt came from, as a
// person quotes it.
func ExampleClient_Attribute() {
	ctx := context.Background()
	c := newProject("attribute-example")
	if _, err := c.PutItem(ctx, "attribute-example", "receipts", client.ItemWrite{Content: "Refunds need a receipt."}); err != nil {
		log.Fatal(err)
	}
	p, err := c.Assemble(ctx, "attribute-example", client.PacketRequest{TargetRole: "implementer"})
	if err != nil {
		log.Fatal(err)
	}
	a, err := c.Attribute(ctx, "attribute-example", p.PacketId, "refunds NEED a receipt")
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range a.Matches {
		for _, raw := range m.Records {
			var r client.Record // an AttributeRecord is a Record with its item version
			if err := json.Unmarshal(raw, &r); err != nil {
				log.Fatal(err)
			}
			fmt.Printf("%s match of %q: %s:%s v%d in %s\n", m.Match, m.Text, r.Subject, r.Key, *r.Version, *r.Section)
		}
	}
	// Output:
	// normalized match of "Refunds need a receipt": item:receipts v1 in Project Knowledge
}

// Import items in one of the formats contextd reads (here its own; kxm and
// navi too); importing them again changes nothing.
func ExampleClient_ImportItems() {
	ctx := context.Background()
	c := newProject("import-example")
	items := []json.RawMessage{
		json.RawMessage(`{"key":"style","content":"Use British spelling."}`),
		json.RawMessage(`{"key":"tone","content":"Be brief.","priority":80}`),
	}
	for range 2 {
		res, err := c.ImportItems(ctx, "import-example", client.ImportRequestFormatContextd, items)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("created %d, updated %d, unchanged %d\n", res.Created, res.Updated, res.Unchanged)
	}
	_, err := c.ImportItems(ctx, "import-example", client.ImportRequestFormatContextd, []json.RawMessage{json.RawMessage(`{"key":"empty"}`)})
	var p *client.Problem
	if errors.As(err, &p) {
		for _, f := range p.Errors {
			fmt.Println(p.Status, p.Code, f.Pointer, f.Code)
		}
	}
	// Output:
	// created 2, updated 0, unchanged 0
	// created 0, updated 0, unchanged 2
	// 422 validation_failed /items/0/content required
}

// Hand work to another role, and answer the handoff.
func ExampleClient_CreateHandoff() {
	ctx := context.Background()
	c := newProject("handoff-example")
	h, err := c.CreateHandoff(ctx, "handoff-example", client.HandoffCreate{
		TaskId:  "T-1",
		Intent:  "request_review",
		Source:  &client.HandoffSource{Role: new("implementer")},
		Target:  client.HandoffTarget{Role: new("reviewer")},
		Summary: new("The refund patch."),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(h.Status, *h.Source.Role, "→", *h.Target.Role)
	if h, err = c.RejectHandoff(ctx, "handoff-example", h.Id, "no tests"); err != nil {
		log.Fatal(err)
	}
	fmt.Println(h.Status, *h.StatusReason)
	_, err = c.AcceptHandoff(ctx, "handoff-example", h.Id, "")
	var p *client.Problem
	if errors.As(err, &p) {
		fmt.Println(p.Status, p.Code) // only a pending handoff can be accepted
	}
	d, err := c.Handoff(ctx, "handoff-example", h.Id)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range d.Events {
		fmt.Println(e.Event, e.ToStatus)
	}
	// Output:
	// pending implementer → reviewer
	// rejected no tests
	// 409 invalid_transition
	// created pending
	// rejected rejected
}

// Follow a role's inbox. The stream resumes after the last event it
// yielded when the connection drops; after a restart of the program, give
// the last id handled as LastEventID.
func ExampleClient_Events() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newProject("events-example")
	for _, task := range []string{"T-1", "T-2"} {
		if _, err := c.CreateHandoff(ctx, "events-example", client.HandoffCreate{TaskId: task, Intent: "request_review", Target: client.HandoffTarget{Role: new("reviewer")}}); err != nil {
			log.Fatal(err)
		}
	}
	last := "0" // from the project's first event; "" would start from now
	for ev, err := range c.Events(ctx, "events-example", client.EventsOptions{TargetRole: "reviewer", LastEventID: last}) {
		if err != nil {
			log.Fatal(err)
		}
		d, err := ev.Decode()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.Type, d.TaskID, d.ToStatus)
		last = ev.ID
		break // handle one event, remember its id
	}
	// Later: everything after the last id handled comes first.
	for ev, err := range c.Events(ctx, "events-example", client.EventsOptions{TargetRole: "reviewer", LastEventID: last}) {
		if err != nil {
			log.Fatal(err)
		}
		d, _ := ev.Decode()
		fmt.Println(ev.Type, d.TaskID, d.ToStatus)
		break
	}
	// Output:
	// created T-1 pending
	// created T-2 pending
}

// Every answer that is not 2xx is a *client.Problem with the problem
// document's members.
func ExampleProblem() {
	ctx := context.Background()
	newProject("problem-example")
	reader, err := client.New(serverURL, readerKey)
	if err != nil {
		log.Fatal(err)
	}
	_, err = reader.Item(ctx, "problem-example", "missing")
	var p *client.Problem
	if errors.As(err, &p) {
		fmt.Println(p.Status, p.Code, p.RequestID != "")
	}
	_, err = reader.PutItem(ctx, "problem-example", "rule", client.ItemWrite{Content: "x"})
	if errors.As(err, &p) {
		fmt.Println(p.Status, p.Code)
	}
	_, err = reader.Assemble(ctx, "problem-example", client.PacketRequest{TargetRole: "reviewer", TokenBudget: new(-1)})
	fmt.Println(err)
	// Output:
	// 404 not_found true
	// 403 forbidden
	// 422 validation_failed: the request has invalid values; see errors
}
