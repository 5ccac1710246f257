package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
	"github.com/contextd/contextd/internal/app"
)

// client talks to a running contextd: the Go client (api/client), with
// the key it was given.
type client struct {
	*apiclient.Client
	key string
}

type clientFlags struct {
	url, key, project string
	// timeout bounds each request (0: 30 s); an import's batches may take
	// longer on a loaded server.
	timeout time.Duration
}

func (f *clientFlags) register(cmd *cobra.Command) {
	f.registerWith(cmd, "project (env CONTEXTD_PROJECT); if empty, every project you may see is searched")
}

func (f *clientFlags) registerWith(cmd *cobra.Command, projectHelp string) {
	f.registerServer(cmd)
	cmd.Flags().StringVar(&f.project, "project", os.Getenv("CONTEXTD_PROJECT"), projectHelp)
}

// registerServer declares --url and --key alone, for commands of no project.
func (f *clientFlags) registerServer(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.url, "url", app.EnvOr("CONTEXTD_URL", "http://127.0.0.1:8080"), "server URL (env CONTEXTD_URL)")
	cmd.Flags().StringVar(&f.key, "key", os.Getenv("CONTEXTD_KEY"), "API key (env CONTEXTD_KEY; default: the embedded default's .contextd/admin.key)")
}

func (f *clientFlags) client() (*client, error) {
	if f.key == "" {
		// The embedded default keeps its first admin's key in its data
		// directory (serve writes it, 0600).
		path := filepath.Join(app.EnvOr("CONTEXTD_DATA_DIR", ".contextd"), "admin.key")
		if b, err := os.ReadFile(path); err == nil {
			f.key = strings.TrimSpace(string(b))
		}
	}
	if f.key == "" {
		return nil, errors.New("no API key: pass --key, set CONTEXTD_KEY, or run where the embedded default keeps .contextd/admin.key")
	}
	timeout := f.timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	c, err := apiclient.New(f.url, f.key, apiclient.WithHTTPClient(&http.Client{Timeout: timeout}))
	if err != nil {
		return nil, err
	}
	return &client{Client: c, key: f.key}, nil
}

// call sends one request of the generated client and prints its answer
// as JSON: the command line's output is the API's.
func (c *client) call(cmd *cobra.Command, send func(context.Context, *apiclient.Raw) (*http.Response, error)) error {
	res, err := send(cmd.Context(), c.Raw())
	var out any
	if err := c.ReadAnswer(res, err, &out); err != nil {
		return err
	}
	return printJSON(cmd.OutOrStdout(), out)
}

// jsonBody is v as a request body, nil for no body.
func jsonBody(v any) (io.Reader, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(b), nil
}

const contentJSON = "application/json"

// isStatus reports whether err is a problem answer of that status.
func isStatus(err error, status int) bool {
	var p *apiclient.Problem
	return errors.As(err, &p) && p.Status == status
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// findPacket returns the packet's project: the given one, or the first
// project the caller may see that holds the packet.
func (c *client) findPacket(ctx context.Context, project, id string) (*apiclient.Packet, error) {
	if project != "" {
		return c.Packet(ctx, project, id)
	}
	limit, cursor := apiclient.Limit(1000), ""
	for {
		var page apiclient.ProjectList
		res, err := c.Raw().ListProjects(ctx, &apiclient.ListProjectsParams{Limit: &limit, Cursor: &cursor})
		if err := c.ReadAnswer(res, err, &page); err != nil {
			return nil, err
		}
		for _, pr := range page.Data {
			p, err := c.Packet(ctx, pr.Project, id)
			if err == nil {
				return p, nil
			}
			if !isStatus(err, http.StatusNotFound) {
				return nil, err
			}
		}
		if page.NextCursor == nil {
			return nil, fmt.Errorf("packet %s not found in any project you may see", id)
		}
		cursor = *page.NextCursor
	}
}

func newWhy() *cobra.Command {
	var f clientFlags
	var layer string
	cmd := &cobra.Command{
		Use:   "why PACKET_ID ITEM_KEY|HANDOFF_ID",
		Short: "Explain why a packet did or did not contain an item (or a handoff, hnd_...)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			p, err := c.findPacket(ctx, f.project, args[0])
			if err != nil {
				return err
			}
			q := apiclient.WhyPacketParams{Item: &args[1]}
			if strings.HasPrefix(args[1], "hnd_") {
				q = apiclient.WhyPacketParams{Handoff: &args[1]} // handoff ids start with hnd_
			}
			if layer != "" {
				q.Layer = &layer
			}
			w, err := c.Why(ctx, p.Project, p.PacketId, q)
			if err != nil {
				return err
			}
			printWhy(cmd.OutOrStdout(), p, args[1], w)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&layer, "layer", "", "project or shared: which layer's item of the key to explain")
	return cmd
}

func printWhy(out io.Writer, p *apiclient.Packet, key string, w *apiclient.WhyAnswer) {
	fmt.Fprintf(out, "packet %s  (project %s, role %s, %s)\n", p.PacketId, p.Project, p.TargetRole, p.CreatedAt.Format(time.RFC3339))
	version := ""
	if w.Item != nil {
		version = fmt.Sprintf(" v%d", w.Item.Version)
	}
	subject := "item"
	if w.Handoff != nil {
		subject = "handoff"
		version = fmt.Sprintf(" (%s → %s, %s)", deref(w.Handoff.Source.Role), deref(w.Handoff.Target.Role), w.Handoff.Status)
	}
	switch w.Decision {
	case "included":
		fmt.Fprintf(out, "%s %s%s: INCLUDED in %s\n", subject, key, version, deref(w.Section))
		fmt.Fprintf(out, "  rule:    %s\n", deref(w.Rule))
		if w.Rank != nil && w.Tokens != nil {
			fmt.Fprintf(out, "  rank:    %d   tokens: %d\n", *w.Rank, *w.Tokens)
		}
		if w.Span != nil {
			fmt.Fprintf(out, "  bytes:   [%d, %d) of the rendered text\n", w.Span.Start, w.Span.End)
			fmt.Fprintf(out, "  text:    %q\n", p.Rendered[w.Span.Start:w.Span.End])
		}
	case "excluded":
		fmt.Fprintf(out, "%s %s%s: EXCLUDED (%s)\n", subject, key, version, deref(w.Reason))
		if w.Rule != nil {
			fmt.Fprintf(out, "  rule:    %s (it fired)\n", *w.Rule)
		}
		fmt.Fprintf(out, "  detail:  %s\n", deref(w.Detail))
	default:
		fmt.Fprintf(out, "%s %s%s: NOT A CANDIDATE (%s)\n", subject, key, version, deref(w.Reason))
		fmt.Fprintf(out, "  detail:  %s\n", deref(w.Detail))
	}
	if w.Layer != nil {
		fmt.Fprintf(out, "  layer:   %s\n", *w.Layer)
	}
	if w.Item != nil && !w.Item.Deleted {
		fmt.Fprintf(out, "  as it was then (%s, %s, written %s by %s):\n", w.Item.Kind, w.Item.Authority, w.Item.CreatedAt.Format(time.RFC3339), w.Item.CreatedBy)
		for _, line := range strings.Split(w.Item.Content, "\n") {
			fmt.Fprintf(out, "    %s\n", line)
		}
	}
}

func newPacket() *cobra.Command {
	cmd := &cobra.Command{Use: "packet", Aliases: []string{"packets"}, Short: "Assemble and inspect packets"}
	var f clientFlags
	show := &cobra.Command{
		Use:   "show PACKET_ID",
		Short: "Print a packet: its budget, sections, exclusions and rendered text",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			p, err := c.findPacket(cmd.Context(), f.project, args[0])
			if err != nil {
				return err
			}
			printPacket(cmd.OutOrStdout(), p)
			recs, err := c.Records(cmd.Context(), p.Project, p.PacketId)
			if err != nil {
				return err
			}
			printExcluded(cmd.OutOrStdout(), recs.Data)
			return nil
		},
	}
	f.register(show)
	cmd.AddCommand(show)
	cmd.AddCommand(packetCommands()...)
	return cmd
}

func printPacket(out io.Writer, p *apiclient.Packet) {
	fmt.Fprintf(out, "packet    %s\n", p.PacketId)
	fmt.Fprintf(out, "project   %s   role %s   task %s\n", p.Project, p.TargetRole, deref(p.TaskId))
	fmt.Fprintf(out, "created   %s by %s\n", p.CreatedAt.Format(time.RFC3339Nano), p.CreatedBy)
	fmt.Fprintf(out, "format    %s   tokenizer %s   sha256 %s\n", p.Format, p.Tokenizer, p.RenderedSha256)
	fmt.Fprintf(out, "budget    %d of %d tokens used, %d headroom\n", p.Budget.Used, p.Budget.Allocated, p.Budget.Headroom)
	for _, g := range p.Budget.UnresolvedGaps {
		if g.Key != nil {
			fmt.Fprintf(out, "  gap     %s v%d needed %d tokens (%s)\n", *g.Key, deref32(g.Version), deref32(g.Tokens), g.Reason)
		} else {
			fmt.Fprintf(out, "  gap     %s\n", g.Reason)
		}
	}
	if len(p.Excluded) > 0 {
		reasons := make([]string, 0, len(p.Excluded))
		for r := range p.Excluded {
			reasons = append(reasons, r)
		}
		sort.Strings(reasons)
		var parts []string
		for _, r := range reasons {
			parts = append(parts, fmt.Sprintf("%s %d", r, p.Excluded[r]))
		}
		fmt.Fprintf(out, "excluded  %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintln(out, "sections")
	for _, s := range p.Sections {
		fmt.Fprintf(out, "  %s\n", s.Name)
		for _, e := range s.Entries {
			name := e.Subject + ":" + e.Key
			if e.Version != nil {
				name += fmt.Sprintf(" v%d", *e.Version)
			}
			fmt.Fprintf(out, "    %-40s %5d tok  [%d,%d)  %s\n", name, e.Tokens, e.Span.Start, e.Span.End, e.Rule)
		}
	}
	fmt.Fprintln(out, "---- rendered ----")
	fmt.Fprint(out, p.Rendered)
	if !strings.HasSuffix(p.Rendered, "\n") {
		fmt.Fprintln(out)
	}
}

func deref32(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// printExcluded lists each excluded item of a packet with its reason.
func printExcluded(out io.Writer, recs []apiclient.Record) {
	n := 0
	for _, r := range recs {
		if r.Decision != "excluded" || r.Subject != "item" {
			continue
		}
		if n == 0 {
			fmt.Fprintln(out, "excluded items:")
		}
		n++
		fmt.Fprintf(out, "  %-32s v%-3d %s", r.Key, deref32(r.Version), deref(r.Reason))
		if d := deref(r.Detail); d != "" {
			fmt.Fprintf(out, ": %s", d)
		}
		fmt.Fprintln(out)
	}
}
