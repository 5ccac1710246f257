// Package limits is the bound on every input: the largest value of each
// field a request may carry, so that the work of a request is bounded by
// its input and these numbers. The defaults follow KXM's own limits where
// it has them. Lengths of names and texts are in characters (runes);
// content and documents are in bytes.
//
// The limits are one value for the whole process: Set is called once, by
// serve, before any request; everything else reads Get. They decide only
// what is refused (422 validation_failed with the pointer), never what a
// packet holds, so assembly stays a pure function of its inputs.
package limits

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/contextd/contextd/internal/validation"
)

// Limits are the bounds. The tag names each for --limit name=value.
type Limits struct {
	Role        int `limit:"role"`        // characters of a role name
	TaskID      int `limit:"task_id"`     // characters
	StepID      int `limit:"step_id"`     // characters
	Objective   int `limit:"objective"`   // characters of a task objective
	AgentName   int `limit:"agent_name"`  // characters
	Description int `limit:"description"` // characters of a project description
	Summary     int `limit:"summary"`     // characters of a handoff's or an item's summary
	Reason      int `limit:"reason"`      // characters of a rejection's or redaction's reason
	Query       int `limit:"query"`       // characters of a relevance query or ?q=
	Content     int `limit:"content"`     // bytes of an item's content
	Messages    int `limit:"messages"`    // history messages in a packet request
	Message     int `limit:"message"`     // bytes of one message
	ToolResults int `limit:"tool_results"`
	ToolResult  int `limit:"tool_result"` // bytes of one tool result
	Keywords    int `limit:"keywords"`    // keywords of one item
	Keyword     int `limit:"keyword"`     // characters of one keyword
	Pins        int `limit:"pins"`
	// AgentContext is the bytes of a request's agent_context (as JSON),
	// Depth how deeply agent_context and variables may nest.
	AgentContext int `limit:"agent_context"`
	Depth        int `limit:"depth"`
	Metadata     int `limit:"metadata"`  // bytes of an item's metadata (as JSON)
	Variables    int `limit:"variables"` // members of variables
	Text         int `limit:"text"`      // characters of other short texts: a title, a criterion, a step, an outcome
	List         int `limit:"list"`      // entries of other lists: criteria, outcomes, decisions, predecessors, roles
}

// Default is the limits unless configured.
var Default = Limits{
	Role: 64, TaskID: 128, StepID: 64, Objective: 4000, AgentName: 128, Description: 2000, Summary: 4000,
	Reason: 2000, Query: 4000, Content: 1 << 20, Messages: 1000, Message: 100 << 10, ToolResults: 200,
	ToolResult: 100 << 10, Keywords: 64, Keyword: 100, Pins: 1000, AgentContext: 256 << 10, Depth: 16, Metadata: 64 << 10,
	Variables: 1000, Text: 4000, List: 1000,
}

var current atomic.Pointer[Limits]

func init() { d := Default; current.Store(&d) }

// Get is the process's limits.
func Get() Limits { return *current.Load() }

// Set makes l the process's limits (serve, once, at start; tests).
func Set(l Limits) { current.Store(&l) }

// Names lists the limits' names, for the flag's help.
func Names() []string {
	var out []string
	t := reflect.TypeOf(Limits{})
	for i := range t.NumField() {
		out = append(out, t.Field(i).Tag.Get("limit"))
	}
	sort.Strings(out)
	return out
}

// Value is the limit of that name (0: no such limit).
func (l Limits) Value(name string) int {
	v := reflect.ValueOf(l)
	for i := range v.NumField() {
		if v.Type().Field(i).Tag.Get("limit") == name {
			return int(v.Field(i).Int())
		}
	}
	return 0
}

// With is l with the named values changed ("content" → "2097152").
func (l Limits) With(values map[string]string) (Limits, error) {
	v := reflect.ValueOf(&l).Elem()
	t := v.Type()
	for name, val := range values {
		found := false
		for i := range t.NumField() {
			if t.Field(i).Tag.Get("limit") != name {
				continue
			}
			n, err := strconv.Atoi(strings.TrimSpace(val))
			if err != nil || n < 1 {
				return l, fmt.Errorf("limit %s: a positive whole number, not %q", name, val)
			}
			v.Field(i).SetInt(int64(n))
			found = true
		}
		if !found {
			return l, fmt.Errorf("no limit named %q (known: %s)", name, strings.Join(Names(), ", "))
		}
	}
	return l, nil
}

// Chars adds a problem when s is longer than max characters.
func Chars(errs *validation.List, pointer, s string, max int) {
	if len(s) > max && utf8.RuneCountInString(s) > max {
		errs.Add(pointer, "too_long", "at most %d characters, not %d", max, utf8.RuneCountInString(s))
	}
}

// Bytes adds a problem when s is longer than max bytes.
func Bytes(errs *validation.List, pointer string, n, max int) {
	if n > max {
		errs.Add(pointer, "too_long", "at most %d bytes, not %d", max, n)
	}
}

// Items adds a problem when a list holds more than max entries.
func Items(errs *validation.List, pointer string, n, max int) {
	if n > max {
		errs.Add(pointer, "too_many", "at most %d entries, not %d", max, n)
	}
}
