package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/app"
)

// client talks to a running contextd.
type client struct {
	base, key string
	http      *http.Client
}

type clientFlags struct{ url, key, project string }

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
	return &client{base: strings.TrimRight(f.url, "/"), key: f.key, http: &http.Client{Timeout: 30 * time.Second}}, nil
}

// apiError is a problem+json answer.
type apiError struct {
	Status int
	Code   string
	Detail string
	Errors []api.FieldError
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Detail) }

func (c *client) get(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, path, nil, out)
}

// do sends one request (body, when not nil, as JSON) and decodes a 2xx
// answer into out (when not nil); anything else is an *apiError.
func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("contextd at %s: %w", c.base, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode >= 300 {
		var p api.Problem
		_ = json.Unmarshal(b, &p)
		e := &apiError{Status: res.StatusCode, Code: p.Code, Detail: deref(p.Detail)}
		if p.Errors != nil {
			e.Errors = *p.Errors
		}
		return e
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// findPacket returns the packet's project: the given one, or the first
// project the caller may see that holds the packet.
func (c *client) findPacket(ctx context.Context, project, id string) (*api.Packet, error) {
	var p api.Packet
	if project != "" {
		if err := c.get(ctx, "/v1/projects/"+url.PathEscape(project)+"/packets/"+url.PathEscape(id), &p); err != nil {
			return nil, err
		}
		return &p, nil
	}
	cursor := ""
	for {
		var page api.ProjectList
		if err := c.get(ctx, "/v1/projects?limit=1000&cursor="+url.QueryEscape(cursor), &page); err != nil {
			return nil, err
		}
		for _, pr := range page.Data {
			err := c.get(ctx, "/v1/projects/"+url.PathEscape(pr.Project)+"/packets/"+url.PathEscape(id), &p)
			if err == nil {
				return &p, nil
			}
			var ae *apiError
			if !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
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
			var w api.WhyAnswer
			param := "item"
			if strings.HasPrefix(args[1], "hnd_") {
				param = "handoff" // handoff ids start with hnd_
			}
			path := "/v1/projects/" + url.PathEscape(p.Project) + "/packets/" + url.PathEscape(p.PacketId) + "/why?" + param + "=" + url.QueryEscape(args[1])
			if layer != "" {
				path += "&layer=" + url.QueryEscape(layer)
			}
			if err := c.get(ctx, path, &w); err != nil {
				return err
			}
			printWhy(cmd.OutOrStdout(), p, args[1], &w)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&layer, "layer", "", "project or shared: which layer's item of the key to explain")
	return cmd
}

func printWhy(out io.Writer, p *api.Packet, key string, w *api.WhyAnswer) {
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
			var recs api.RecordList
			if err := c.get(cmd.Context(), "/v1/projects/"+url.PathEscape(p.Project)+"/packets/"+url.PathEscape(p.PacketId)+"/records", &recs); err != nil {
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

func printPacket(out io.Writer, p *api.Packet) {
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
func printExcluded(out io.Writer, recs []api.Record) {
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
