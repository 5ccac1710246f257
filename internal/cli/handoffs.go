package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
)

func newHandoffs() *cobra.Command {
	cmd := &cobra.Command{Use: "handoffs", Short: "Hand work over, answer, inspect and follow handoffs"}
	cmd.AddCommand(handoffHistory(), handoffCreate(), handoffMove("accept"), handoffMove("reject"), handoffMove("withdraw"),
		handoffShow(), handoffWatch())
	return cmd
}

func handoffHistory() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:     "history TASK_ID",
		Short:   "Print a task's timeline: every handoff event and every packet, oldest first",
		Example: `  contextd handoffs history T-1 --project acme`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := projectClient(&f)
			if err != nil {
				return err
			}
			var h apiclient.TaskHistory
			res, err := c.Raw().GetTaskHistory(cmd.Context(), f.project, args[0])
			raw, _, err := c.answer(res, err, &h)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) { printHistory(out, f.project, &h) })
		},
	}
	f.registerWith(cmd, projectRequired)
	f.registerJSON(cmd)
	return cmd
}

// handoffFlags are the everyday members of a handoff manifest; --file
// gives the whole manifest, and the flags given set their members on top.
type handoffFlags struct {
	file, task, intent, target, source, summary, reworkOf, packet string
	decisions, questions                                          []string
}

func handoffCreate() *cobra.Command {
	var f clientFlags
	var h handoffFlags
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Hand work to another role",
		Long: `create hands a task's work to another role: a pending handoff its target
accepts or rejects (with a reason), and its source may withdraw. A later
handoff to the same role with --rework-of answers a rejection. The manifest
is built from the flags, on top of --file's JSON (the API's HandoffCreate, -
for standard input) when it is given. --intent is request_review,
dispatch_fix, request_approval or complete_workflow.`,
		Example: `  contextd handoffs create --project acme --task T-1 --intent request_review --target-role critic --summary "Refund limit patch, tests added"
  contextd handoffs create --project acme --task T-1 --intent request_review --target-role critic --rework-of hnd_01J... --summary "Reworked: tests added"
  contextd handoffs create --project acme --file manifest.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := projectClient(&f)
			if err != nil {
				return err
			}
			m, err := h.manifest(cmd)
			if err != nil {
				return err
			}
			body, err := jsonBody(m)
			if err != nil {
				return err
			}
			var out apiclient.Handoff
			res, err := c.Raw().CreateHandoffWithBody(cmd.Context(), f.project, &apiclient.CreateHandoffParams{}, contentJSON, body)
			raw, _, err := c.answer(res, err, &out)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(w io.Writer) {
				fmt.Fprintf(w, "handoff %s created: %s → %s, %s\n", out.Id, roleOf(out.Source.Role), roleOf(out.Target.Role), out.Status)
				fmt.Fprintf(w, "  task %s, intent %s\n", out.TaskId, out.Intent)
				if out.ReworkOf != nil {
					fmt.Fprintf(w, "  rework of %s\n", *out.ReworkOf)
				}
				if out.Warnings != nil {
					for _, wn := range *out.Warnings {
						fmt.Fprintf(w, "  warning %s: %s\n", wn.Code, wn.Detail)
					}
				}
			})
		},
	}
	f.registerWith(cmd, projectRequired)
	f.registerJSON(cmd)
	fl := cmd.Flags()
	fl.StringVar(&h.file, "file", "", "the manifest as JSON (the API's HandoffCreate), - for standard input; the flags given set their members on top")
	fl.StringVar(&h.task, "task", "", "the task's id (task_id)")
	fl.StringVar(&h.intent, "intent", "", "request_review, dispatch_fix, request_approval or complete_workflow")
	fl.StringVar(&h.target, "target-role", "", "the role the work goes to")
	fl.StringVar(&h.source, "source-role", "", "the role handing over (default: your agent's)")
	fl.StringVar(&h.summary, "summary", "", "what is handed over, in a sentence or two")
	fl.StringVar(&h.reworkOf, "rework-of", "", "the rejected handoff this one answers")
	fl.StringVar(&h.packet, "packet", "", "the packet the work was done with")
	fl.StringArrayVar(&h.decisions, "decision", nil, "a decision taken (repeatable)")
	fl.StringArrayVar(&h.questions, "question", nil, "an open question (repeatable)")
	return cmd
}

// manifest is the handoff manifest: --file's members, with the flags given
// set on top.
func (h *handoffFlags) manifest(cmd *cobra.Command) (map[string]any, error) {
	m := map[string]any{}
	if h.file != "" {
		b, err := readInput(cmd, h.file)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("--file: not a JSON object: %w", err)
		}
	} else if h.task == "" || h.intent == "" || h.target == "" {
		return nil, errors.New("give --task, --intent and --target-role (or the manifest as JSON with --file)")
	}
	str := func(name, v string) {
		if v != "" {
			m[name] = v
		}
	}
	str("task_id", h.task)
	str("intent", h.intent)
	str("summary", h.summary)
	str("rework_of", h.reworkOf)
	str("packet_id", h.packet)
	role := func(name, v string) {
		if v == "" {
			return
		}
		obj, _ := m[name].(map[string]any)
		if obj == nil {
			obj = map[string]any{}
		}
		obj["role"] = v
		m[name] = obj
	}
	role("target", h.target)
	role("source", h.source)
	for _, d := range h.decisions {
		m["decisions"] = appendTo(m["decisions"], d)
	}
	for _, q := range h.questions {
		m["open_questions"] = appendTo(m["open_questions"], q)
	}
	return m, nil
}

func roleOf(r *string) string {
	if r == nil || *r == "" {
		return "?"
	}
	return *r
}

// transitions send a handoff's accept, reject or withdraw.
var transitions = map[string]func(ctx context.Context, raw *apiclient.Raw, project, id string, body apiclient.TransitionRequest) (*http.Response, error){
	"accept": func(ctx context.Context, raw *apiclient.Raw, project, id string, body apiclient.TransitionRequest) (*http.Response, error) {
		return raw.AcceptHandoff(ctx, project, id, &apiclient.AcceptHandoffParams{}, body)
	},
	"reject": func(ctx context.Context, raw *apiclient.Raw, project, id string, body apiclient.TransitionRequest) (*http.Response, error) {
		return raw.RejectHandoff(ctx, project, id, &apiclient.RejectHandoffParams{}, body)
	},
	"withdraw": func(ctx context.Context, raw *apiclient.Raw, project, id string, body apiclient.TransitionRequest) (*http.Response, error) {
		return raw.WithdrawHandoff(ctx, project, id, &apiclient.WithdrawHandoffParams{}, body)
	},
}

// handoffMove is `handoffs accept|reject|withdraw`.
func handoffMove(t string) *cobra.Command {
	var f clientFlags
	var reason string
	who := "its target role (or an admin)"
	if t == "withdraw" {
		who = "its source (or an admin)"
	}
	c := &cobra.Command{Use: t + " HANDOFF_ID", Short: strings.ToUpper(t[:1]) + t[1:] + " a pending handoff: " + who, Args: cobra.ExactArgs(1),
		Example: fmt.Sprintf("  contextd handoffs %s hnd_01J... --project acme --reason %q", t, map[string]string{
			"accept": "Looks right", "reject": "No test for the 500 EUR edge", "withdraw": "Wrong branch"}[t]),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := projectClient(&f)
			if err != nil {
				return err
			}
			var body apiclient.TransitionRequest
			if reason != "" {
				body.Reason = &reason
			}
			var h apiclient.Handoff
			res, err := transitions[t](cmd.Context(), c.Raw(), f.project, args[0], body)
			raw, _, err := c.answer(res, err, &h)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(w io.Writer) {
				fmt.Fprintf(w, "handoff %s is %s (%s → %s, task %s)", h.Id, h.Status, roleOf(h.Source.Role), roleOf(h.Target.Role), h.TaskId)
				if r := deref(h.StatusReason); r != "" {
					fmt.Fprintf(w, ": %s", r)
				}
				fmt.Fprintln(w)
			})
		}}
	c.Flags().StringVar(&reason, "reason", "", "why (required to reject or withdraw)")
	f.registerWith(c, projectRequired)
	f.registerJSON(c)
	return c
}

func handoffShow() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{Use: "show HANDOFF_ID", Short: "Print a handoff with its events, rework chain and packets", Args: cobra.ExactArgs(1),
		Example: `  contextd handoffs show hnd_01J... --project acme`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := projectClient(&f)
			if err != nil {
				return err
			}
			var h apiclient.HandoffDetail
			res, err := c.Raw().GetHandoff(cmd.Context(), f.project, args[0], &apiclient.GetHandoffParams{})
			raw, _, err := c.answer(res, err, &h)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(w io.Writer) { printHandoff(w, &h) })
		}}
	f.registerWith(cmd, projectRequired)
	f.registerJSON(cmd)
	return cmd
}

func printHandoff(w io.Writer, h *apiclient.HandoffDetail) {
	fmt.Fprintf(w, "handoff   %s  (project %s, task %s)\n", h.Id, h.Project, h.TaskId)
	status := h.Status
	if r := deref(h.StatusReason); r != "" {
		status += ": " + r
	}
	fmt.Fprintf(w, "status    %s\n", status)
	fmt.Fprintf(w, "intent    %s, %s → %s\n", h.Intent, roleOf(h.Source.Role), roleOf(h.Target.Role))
	fmt.Fprintf(w, "created   %s by %s\n", h.CreatedAt.Format(time.RFC3339), h.CreatedBy)
	if h.Summary != "" {
		fmt.Fprintf(w, "summary   %s\n", h.Summary)
	}
	for _, d := range h.Decisions {
		fmt.Fprintf(w, "decision  %s\n", d)
	}
	for _, q := range h.OpenQuestions {
		fmt.Fprintf(w, "question  %s\n", q)
	}
	if h.PacketId != nil {
		fmt.Fprintf(w, "packet    %s\n", *h.PacketId)
	}
	fmt.Fprintln(w, "events")
	for _, e := range h.Events {
		from := "·"
		if e.FromStatus != nil {
			from = *e.FromStatus
		}
		line := fmt.Sprintf("  %s  %-10s %s → %s  by %s (%s)", e.CreatedAt.Format(time.RFC3339), e.Event, from, e.ToStatus, e.Actor, e.ActorRole)
		if e.Reason != "" {
			line += "  reason: " + e.Reason
		}
		fmt.Fprintln(w, line)
	}
	links := func(name string, l []apiclient.HandoffLink) {
		for _, x := range l {
			fmt.Fprintf(w, "%-9s %s  %s → %s, %s\n", name, x.Id, x.SourceRole, x.TargetRole, x.Status)
		}
	}
	links("rework of", h.ReworkChain.Ancestors)
	links("reworked", h.ReworkChain.Descendants)
	for _, u := range h.UsedByPackets {
		fmt.Fprintf(w, "used by   packet %s (%s, %s)\n", u.PacketId, u.TargetRole, u.CreatedAt.Format(time.RFC3339))
	}
}

// handoffWatch is `handoffs watch`: the event stream, one line per event,
// resumable with --last-event-id (each line carries its id).
func handoffWatch() *cobra.Command {
	var f clientFlags
	var target, source, last string
	cmd := &cobra.Command{Use: "watch", Short: "Follow handoff events (--target-role: an inbox; --source-role: the answers to your handoffs)", Args: cobra.NoArgs,
		Long: `watch follows a project's handoff events as the server commits them, one
line each, until the connection ends (a supervisor restarts it with
--last-event-id, the id that starts the last line). --json prints each event
as {"id","event","data"} on a line of its own.`,
		Example: `  contextd handoffs watch --project acme --target-role critic              # the critics' inbox, from now
  contextd handoffs watch --project acme --source-role implementer --last-event-id 0 --json`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := projectClient(&f)
			if err != nil {
				return err
			}
			// One connection: the command ends with the stream.
			opts := apiclient.EventsOptions{TargetRole: target, SourceRole: source, LastEventID: last, Once: true}
			err = c.Watch(cmd.Context(), f.project, opts, func(ev apiclient.Event) error {
				if f.json {
					return printEvent(cmd.OutOrStdout(), ev)
				}
				return printEventLine(cmd.OutOrStdout(), ev)
			})
			var p *apiclient.Problem
			if errors.As(err, &p) {
				return fmt.Errorf("the stream was refused: %w", p)
			}
			return err
		}}
	f.registerWith(cmd, projectRequired)
	f.registerJSON(cmd)
	cmd.Flags().StringVar(&target, "target-role", "", "the inbox of this role")
	cmd.Flags().StringVar(&source, "source-role", "", "the answers to this role's handoffs")
	cmd.Flags().StringVar(&last, "last-event-id", "", "resume after this event id (0: from the first)")
	return cmd
}

// printEvent prints a Server-Sent Event as {"id","event","data"} on a line
// of its own.
func printEvent(out io.Writer, e apiclient.Event) error {
	ev := map[string]any{}
	if e.ID != "" {
		ev["id"] = e.ID
	}
	if e.Type != "" {
		ev["event"] = e.Type
	}
	var d any
	if json.Unmarshal(e.Data, &d) == nil {
		ev["data"] = d
	}
	b, _ := json.Marshal(ev)
	_, err := fmt.Fprintln(out, string(b))
	return err
}

// printEventLine prints an event as a line of the timeline.
func printEventLine(out io.Writer, e apiclient.Event) error {
	d, err := e.Decode()
	if err != nil {
		_, err = fmt.Fprintf(out, "%s  %s  %s\n", e.ID, e.Type, e.Data)
		return err
	}
	from := "·"
	if d.FromStatus != nil {
		from = *d.FromStatus
	}
	line := fmt.Sprintf("%s  %s  %-9s %s  task %s  %s → %s  [%s → %s] by %s (%s)", e.ID, d.CreatedAt.Format(time.RFC3339), d.Event, d.HandoffID,
		d.TaskID, roleOf(d.Source.Role), roleOf(d.Target.Role), from, d.ToStatus, d.Actor, d.ActorRole)
	if d.Reason != "" {
		line += "  reason: " + d.Reason
	}
	_, err = fmt.Fprintln(out, line)
	return err
}

func printHistory(out io.Writer, project string, h *apiclient.TaskHistory) {
	fmt.Fprintf(out, "task %s in %s: %d entries\n\n", h.TaskId, project, len(h.Entries))
	for _, e := range h.Entries {
		at := e.Time.Format(time.RFC3339)
		if e.Type == "packet" {
			step := ""
			if e.StepId != nil {
				step = " step " + *e.StepId
			}
			fmt.Fprintf(out, "%s  %-12s packet   %s%s (agent %s)\n", at, e.Role, deref(e.PacketId), step, e.Agent)
			continue
		}
		from := "·"
		if e.FromStatus != nil {
			from = *e.FromStatus
		}
		line := fmt.Sprintf("%s  %-12s %-9s %s  %s → %s  [%s → %s] (agent %s)", at, e.Role, deref(e.Event), deref(e.HandoffId),
			deref(e.SourceRole), deref(e.TargetRole), from, deref(e.ToStatus), e.Agent)
		if e.Reason != nil && *e.Reason != "" {
			line += "  reason: " + *e.Reason
		}
		fmt.Fprintln(out, line)
	}
}
