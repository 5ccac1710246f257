package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
)

// assembleFlags are `packets assemble`'s everyday members of a packet
// request; --file gives the whole request (PacketRequest), and the flags
// given set their members on top of it.
type assembleFlags struct {
	file, role, query, format, tokenizer, task, step string
	budget                                           int
	messages, pins, predecessors, vars               []string
}

func assembleCommand() *cobra.Command {
	var f clientFlags
	var a assembleFlags
	cmd := &cobra.Command{
		Use:   "assemble",
		Short: "Assemble a packet and print its rendered prompt (its id on standard error)",
		Long: `assemble asks the server for the packet of one prompt and prints the
rendered prompt, as is, on standard output: pipe it to a model. The packet's
id, its budget and how to ask why are printed on standard error. --json
prints the whole answer (sections, records' spans, budget) instead.

The request is built from the flags, on top of --file's JSON (the API's
PacketRequest, - for standard input) when it is given: --role is its
target_role, --message a user message a person wrote (history; keyword
triggers match it), --query the text relevance items are ranked against.`,
		Example: `  contextd packets assemble --project acme --role implementer --message "a customer asks for a refund of 700 EUR"
  contextd packets assemble --project acme --role critic --task T-1 --step review --budget 4000 --pin refund.rules
  contextd packets assemble --project acme --role implementer --query "refund policy" --format kxm --json
  contextd packets assemble --project acme --file request.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := projectClient(&f)
			if err != nil {
				return err
			}
			req, err := a.request(cmd)
			if err != nil {
				return err
			}
			body, err := jsonBody(req)
			if err != nil {
				return err
			}
			var p apiclient.Packet
			res, err := c.Raw().AssemblePacketWithBody(cmd.Context(), f.project, &apiclient.AssemblePacketParams{}, contentJSON, body)
			raw, _, err := c.answer(res, err, &p)
			if err != nil {
				return err
			}
			if f.json {
				err = printRaw(cmd.OutOrStdout(), raw)
			} else {
				_, err = fmt.Fprint(cmd.OutOrStdout(), p.Rendered)
			}
			// After the prompt, so that the id is where a person's eyes are.
			printAssembled(cmd, &p)
			return err
		},
	}
	f.registerWith(cmd, projectRequired)
	f.registerJSON(cmd)
	fl := cmd.Flags()
	fl.StringVar(&a.file, "file", "", "the packet request as JSON (the API's PacketRequest), - for standard input; the flags given set their members on top")
	fl.StringVar(&a.role, "role", "", "the role the packet is for (target_role; required, here or in --file)")
	fl.StringArrayVar(&a.messages, "message", nil, "a user message a person wrote, in order (history; repeatable)")
	fl.StringVar(&a.query, "query", "", "text to rank relevance-triggered items against")
	fl.IntVar(&a.budget, "budget", 0, "token budget (default 16,000; at most 200,000)")
	fl.StringVar(&a.format, "format", "", "markdown (default), blocks, json, kxm or navi")
	fl.StringVar(&a.tokenizer, "tokenizer", "", "o200k_base (default) or cl100k_base")
	fl.StringArrayVar(&a.pins, "pin", nil, "an item key the packet must include (repeatable)")
	fl.StringVar(&a.task, "task", "", "the task's id (task.task_id): its handoffs come with it, and its history shows the packet")
	fl.StringVar(&a.step, "step", "", "the task's step (task.step_id)")
	fl.StringArrayVar(&a.predecessors, "predecessor", nil, "a handoff id this step follows from (repeatable)")
	fl.StringArrayVar(&a.vars, "var", nil, "NAME=VALUE, a template variable (repeatable)")
	return cmd
}

// request is the packet request: --file's members, with the flags given
// set on top (lists appended to the file's).
func (a *assembleFlags) request(cmd *cobra.Command) (map[string]any, error) {
	req := map[string]any{}
	if a.file != "" {
		b, err := readInput(cmd, a.file)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &req); err != nil {
			return nil, fmt.Errorf("--file: not a JSON object: %w", err)
		}
	}
	set := func(name string, v any, given bool) {
		if given {
			req[name] = v
		}
	}
	changed := cmd.Flags().Changed
	set("target_role", a.role, changed("role"))
	set("query", a.query, changed("query"))
	set("token_budget", a.budget, changed("budget"))
	set("format", a.format, changed("format"))
	set("tokenizer", a.tokenizer, changed("tokenizer"))
	for _, m := range a.messages {
		req["history"] = appendTo(req["history"], map[string]any{"role": "user", "author": "person", "content": m})
	}
	for _, p := range a.pins {
		req["pins"] = appendTo(req["pins"], p)
	}
	for _, p := range a.predecessors {
		req["predecessors"] = appendTo(req["predecessors"], p)
	}
	if a.task != "" || a.step != "" {
		task, _ := req["task"].(map[string]any)
		if task == nil {
			task = map[string]any{}
		}
		set := func(k, v string) {
			if v != "" {
				task[k] = v
			}
		}
		set("task_id", a.task)
		set("step_id", a.step)
		req["task"] = task
	}
	if len(a.vars) > 0 {
		vars, _ := req["variables"].(map[string]any)
		if vars == nil {
			vars = map[string]any{}
		}
		for _, kv := range a.vars {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("--var %q: give NAME=VALUE", kv)
			}
			vars[k] = v
		}
		req["variables"] = vars
	}
	if r, _ := req["target_role"].(string); r == "" {
		return nil, errors.New("--role is required (the role the packet is for), or target_role in --file")
	}
	return req, nil
}

// appendTo appends v to a request member that is a list (or absent).
func appendTo(list any, v any) []any {
	l, _ := list.([]any)
	return append(l, v)
}

// printAssembled says on standard error which packet this is and how to
// ask about it, so the prompt alone goes to standard output.
func printAssembled(cmd *cobra.Command, p *apiclient.Packet) {
	w := cmd.ErrOrStderr()
	excluded := 0
	for _, n := range p.Excluded {
		excluded += n
	}
	fmt.Fprintf(w, "packet %s: project %s, role %s, %d of %d tokens, %d excluded\n",
		p.PacketId, p.Project, p.TargetRole, p.Budget.Used, p.Budget.Allocated, excluded)
	if n := len(p.Budget.UnresolvedGaps) + p.Budget.UnresolvedGapsMore; n > 0 {
		fmt.Fprintf(w, "  %d left out for the budget (contextd packets show %s --project %s)\n", n, p.PacketId, p.Project)
	}
	fmt.Fprintf(w, "  why an item is in or out: contextd why %s KEY --project %s\n", p.PacketId, p.Project)
}
