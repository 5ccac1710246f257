package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
)

// jsonCall is a command that sends one request, its body (if any) read as
// JSON from --file (- for standard input), and prints the answer as JSON.
type jsonCall struct {
	f    *clientFlags
	file string
}

func (j *jsonCall) run(cmd *cobra.Command, method, path string, body any) error {
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
	var out any
	if err := c.do(cmd.Context(), method, path, body, &out); err != nil {
		return err
	}
	return printJSON(cmd.OutOrStdout(), out)
}

func (j *jsonCall) project() (string, error) {
	if j.f.project == "" {
		return "", errors.New("--project is required (or set CONTEXTD_PROJECT)")
	}
	return "/v1/projects/" + url.PathEscape(j.f.project), nil
}

// packetCommands are `packet assemble|records|attribute|replay`.
func packetCommands() []*cobra.Command {
	var f clientFlags
	j := &jsonCall{f: &f}
	assemble := &cobra.Command{Use: "assemble", Short: "Assemble a packet from a request (--file REQUEST.json, - for standard input)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := j.project()
			if err != nil {
				return err
			}
			if j.file == "" {
				return errors.New("--file is required: the packet request as JSON (at least target_role)")
			}
			return j.run(cmd, http.MethodPost, p+"/packets", nil)
		}}
	assemble.Flags().StringVar(&j.file, "file", "", "the packet request as JSON, - for standard input")
	byID := func(use, short, method, suffix string, body func(args []string) any) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: cobra.MinimumNArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
			p, err := j.project()
			if err != nil {
				return err
			}
			var b any
			if body != nil {
				b = body(args)
			}
			return j.run(cmd, method, p+"/packets/"+url.PathEscape(args[0])+suffix, b)
		}}
	}
	attribute := byID("attribute PACKET_ID TEXT", "Which records a text of the prompt came from (as people quote it)", http.MethodPost, "/attribute",
		func(args []string) any { return map[string]any{"text": strings.Join(args[1:], " ")} })
	attribute.Args = cobra.MinimumNArgs(2)
	cmds := []*cobra.Command{assemble, attribute,
		byID("records PACKET_ID", "Print a packet's records: every decision, in order", http.MethodGet, "/records", nil),
		byID("replay PACKET_ID", "Assemble a packet again as of its snapshot and compare", http.MethodPost, "/replay", nil),
	}
	for _, c := range cmds {
		f.registerWith(c, "project (env CONTEXTD_PROJECT), required")
	}
	return cmds
}

// handoffCommands are `handoffs create|accept|reject|withdraw|show|watch`.
func handoffCommands() []*cobra.Command {
	var f clientFlags
	j := &jsonCall{f: &f}
	var reason string
	create := &cobra.Command{Use: "create", Short: "Hand work to another role (--file MANIFEST.json, - for standard input)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := j.project()
			if err != nil {
				return err
			}
			if j.file == "" {
				return errors.New("--file is required: the handoff manifest as JSON")
			}
			return j.run(cmd, http.MethodPost, p+"/handoffs", nil)
		}}
	create.Flags().StringVar(&j.file, "file", "", "the manifest as JSON, - for standard input")
	move := func(t string) *cobra.Command {
		c := &cobra.Command{Use: t + " HANDOFF_ID", Short: strings.ToUpper(t[:1]) + t[1:] + " a pending handoff", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				p, err := j.project()
				if err != nil {
					return err
				}
				body := map[string]any{}
				if reason != "" {
					body["reason"] = reason
				}
				return j.run(cmd, http.MethodPost, p+"/handoffs/"+url.PathEscape(args[0])+"/"+t, body)
			}}
		c.Flags().StringVar(&reason, "reason", "", "why (required to reject or withdraw)")
		return c
	}
	show := &cobra.Command{Use: "show HANDOFF_ID", Short: "Print a handoff with its events, rework chain and packets", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := j.project()
			if err != nil {
				return err
			}
			return j.run(cmd, http.MethodGet, p+"/handoffs/"+url.PathEscape(args[0]), nil)
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
			if f.project == "" {
				return errors.New("--project is required (or set CONTEXTD_PROJECT)")
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if target != "" {
				q.Set("target_role", target)
			}
			if source != "" {
				q.Set("source_role", source)
			}
			req, err := http.NewRequestWithContext(cmd.Context(), http.MethodGet, c.base+"/v1/projects/"+url.PathEscape(f.project)+"/handoffs/events?"+q.Encode(), nil)
			if err != nil {
				return err
			}
			req.Header.Set("Authorization", "Bearer "+c.key)
			if last != "" {
				req.Header.Set("Last-Event-ID", last)
			}
			res, err := (&http.Client{}).Do(req) // no timeout: a stream lasts
			if err != nil {
				return err
			}
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("%d: the stream was refused", res.StatusCode)
			}
			return copyEvents(cmd, bufio.NewScanner(res.Body))
		}}
	cmd.Flags().StringVar(&target, "target-role", "", "the inbox of this role")
	cmd.Flags().StringVar(&source, "source-role", "", "the answers to this role's handoffs")
	cmd.Flags().StringVar(&last, "last-event-id", "", "resume after this event id")
	return cmd
}

// copyEvents prints each Server-Sent Event as {"id","event","data"} on a
// line of its own, until the stream ends.
func copyEvents(cmd *cobra.Command, sc *bufio.Scanner) error {
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	ev := map[string]any{}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			ev["id"] = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			ev["event"] = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d any
			if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d) == nil {
				ev["data"] = d
			}
		case line == "" && len(ev) > 0:
			b, _ := json.Marshal(ev)
			fmt.Fprintln(cmd.OutOrStdout(), string(b))
			ev = map[string]any{}
		}
	}
	if errors.Is(sc.Err(), cmd.Context().Err()) {
		return nil
	}
	return sc.Err()
}
