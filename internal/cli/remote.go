package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
)

// jsonCall is a command that sends one request, its body (if any) read as
// JSON from --file (- for standard input), and prints the answer as JSON.
type jsonCall struct {
	f    *clientFlags
	file string
}

// sender sends one request of the generated client, with its JSON body
// (nil for none).
type sender func(ctx context.Context, raw *apiclient.Raw, project string, body io.Reader) (*http.Response, error)

func (j *jsonCall) run(cmd *cobra.Command, body any, send sender) error {
	c, err := j.f.client()
	if err != nil {
		return err
	}
	if j.file != "" {
		raw, err := readInput(cmd, j.file)
		if err != nil {
			return err
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("--file: not JSON: %w", err)
		}
		body = v
	}
	rd, err := jsonBody(body)
	if err != nil {
		return err
	}
	return c.call(cmd, func(ctx context.Context, raw *apiclient.Raw) (*http.Response, error) {
		return send(ctx, raw, j.f.project, rd)
	})
}

// packetCommands are `packet assemble|records|attribute|replay`.
func packetCommands() []*cobra.Command {
	var f clientFlags
	j := &jsonCall{f: &f}
	assemble := &cobra.Command{Use: "assemble", Short: "Assemble a packet from a request (--file REQUEST.json, - for standard input)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.needProject(); err != nil {
				return err
			}
			if j.file == "" {
				return errors.New("--file is required: the packet request as JSON (at least target_role)")
			}
			return j.run(cmd, nil, func(ctx context.Context, raw *apiclient.Raw, project string, body io.Reader) (*http.Response, error) {
				return raw.AssemblePacketWithBody(ctx, project, &apiclient.AssemblePacketParams{}, contentJSON, body)
			})
		}}
	assemble.Flags().StringVar(&j.file, "file", "", "the packet request as JSON, - for standard input")
	// byID is a command of one packet: send gets its id.
	byID := func(use, short string, body func(args []string) any, send func(ctx context.Context, raw *apiclient.Raw, project, id string, body io.Reader) (*http.Response, error)) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: cobra.MinimumNArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.needProject(); err != nil {
				return err
			}
			var b any
			if body != nil {
				b = body(args)
			}
			return j.run(cmd, b, func(ctx context.Context, raw *apiclient.Raw, project string, rd io.Reader) (*http.Response, error) {
				return send(ctx, raw, project, args[0], rd)
			})
		}}
	}
	attribute := byID("attribute PACKET_ID TEXT", "Which records a text of the prompt came from (as people quote it)",
		func(args []string) any { return map[string]any{"text": strings.Join(args[1:], " ")} },
		func(ctx context.Context, raw *apiclient.Raw, project, id string, body io.Reader) (*http.Response, error) {
			return raw.AttributePacketWithBody(ctx, project, id, contentJSON, body)
		})
	attribute.Args = cobra.MinimumNArgs(2)
	cmds := []*cobra.Command{assemble, attribute,
		byID("records PACKET_ID", "Print a packet's records: every decision, in order", nil,
			func(ctx context.Context, raw *apiclient.Raw, project, id string, _ io.Reader) (*http.Response, error) {
				return raw.ListPacketRecords(ctx, project, id, &apiclient.ListPacketRecordsParams{})
			}),
		byID("replay PACKET_ID", "Assemble a packet again as of its snapshot and compare", nil,
			func(ctx context.Context, raw *apiclient.Raw, project, id string, _ io.Reader) (*http.Response, error) {
				return raw.ReplayPacket(ctx, project, id)
			}),
	}
	for _, c := range cmds {
		f.registerWith(c, "project (env CONTEXTD_PROJECT), required")
	}
	return cmds
}

// transitions send a handoff's accept, reject or withdraw.
var transitions = map[string]func(ctx context.Context, raw *apiclient.Raw, project, id string, body io.Reader) (*http.Response, error){
	"accept": func(ctx context.Context, raw *apiclient.Raw, project, id string, body io.Reader) (*http.Response, error) {
		return raw.AcceptHandoffWithBody(ctx, project, id, &apiclient.AcceptHandoffParams{}, contentJSON, body)
	},
	"reject": func(ctx context.Context, raw *apiclient.Raw, project, id string, body io.Reader) (*http.Response, error) {
		return raw.RejectHandoffWithBody(ctx, project, id, &apiclient.RejectHandoffParams{}, contentJSON, body)
	},
	"withdraw": func(ctx context.Context, raw *apiclient.Raw, project, id string, body io.Reader) (*http.Response, error) {
		return raw.WithdrawHandoffWithBody(ctx, project, id, &apiclient.WithdrawHandoffParams{}, contentJSON, body)
	},
}

// handoffCommands are `handoffs create|accept|reject|withdraw|show|watch`.
func handoffCommands() []*cobra.Command {
	var f clientFlags
	j := &jsonCall{f: &f}
	var reason string
	create := &cobra.Command{Use: "create", Short: "Hand work to another role (--file MANIFEST.json, - for standard input)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.needProject(); err != nil {
				return err
			}
			if j.file == "" {
				return errors.New("--file is required: the handoff manifest as JSON")
			}
			return j.run(cmd, nil, func(ctx context.Context, raw *apiclient.Raw, project string, body io.Reader) (*http.Response, error) {
				return raw.CreateHandoffWithBody(ctx, project, &apiclient.CreateHandoffParams{}, contentJSON, body)
			})
		}}
	create.Flags().StringVar(&j.file, "file", "", "the manifest as JSON, - for standard input")
	move := func(t string) *cobra.Command {
		c := &cobra.Command{Use: t + " HANDOFF_ID", Short: strings.ToUpper(t[:1]) + t[1:] + " a pending handoff", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				if err := f.needProject(); err != nil {
					return err
				}
				body := map[string]any{}
				if reason != "" {
					body["reason"] = reason
				}
				return j.run(cmd, body, func(ctx context.Context, raw *apiclient.Raw, project string, rd io.Reader) (*http.Response, error) {
					return transitions[t](ctx, raw, project, args[0], rd)
				})
			}}
		c.Flags().StringVar(&reason, "reason", "", "why (required to reject or withdraw)")
		return c
	}
	show := &cobra.Command{Use: "show HANDOFF_ID", Short: "Print a handoff with its events, rework chain and packets", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.needProject(); err != nil {
				return err
			}
			return j.run(cmd, nil, func(ctx context.Context, raw *apiclient.Raw, project string, _ io.Reader) (*http.Response, error) {
				return raw.GetHandoff(ctx, project, args[0], &apiclient.GetHandoffParams{})
			})
		}}
	cmds := []*cobra.Command{create, move("accept"), move("reject"), move("withdraw"), show, watchCommand(&f)}
	for _, c := range cmds {
		f.registerWith(c, "project (env CONTEXTD_PROJECT), required")
	}
	return cmds
}

// watchCommand is `handoffs watch`: the event stream, one JSON line per
// event, resumable with --last-event-id (each line carries its id).
func watchCommand(f *clientFlags) *cobra.Command {
	var target, source, last string
	cmd := &cobra.Command{Use: "watch", Short: "Follow handoff events (--target-role: an inbox; --source-role: the answers to your handoffs)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.needProject(); err != nil {
				return err
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			// One connection: the command ends with the stream (a
			// supervisor restarts it with --last-event-id).
			opts := apiclient.EventsOptions{TargetRole: target, SourceRole: source, LastEventID: last, Once: true}
			err = c.Watch(cmd.Context(), f.project, opts, func(ev apiclient.Event) error { return printEvent(cmd.OutOrStdout(), ev) })
			var p *apiclient.Problem
			var ue *url.Error
			switch {
			case errors.As(err, &p):
				return fmt.Errorf("%d: the stream was refused", p.Status)
			case errors.As(err, &ue):
				return ue
			}
			return err
		}}
	cmd.Flags().StringVar(&target, "target-role", "", "the inbox of this role")
	cmd.Flags().StringVar(&source, "source-role", "", "the answers to this role's handoffs")
	cmd.Flags().StringVar(&last, "last-event-id", "", "resume after this event id")
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
