package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
)

// packet is the client and the packet a command names: in --project, or
// found in the projects the caller may see (findPacket).
func (f *clientFlags) packet(ctx context.Context, id string) (*client, *apiclient.Packet, error) {
	c, err := f.client()
	if err != nil {
		return nil, nil, err
	}
	p, err := c.findPacket(ctx, f.project, id)
	return c, p, err
}

// findPacket returns the packet's project: the given one, or the first
// project the caller may see that holds the packet, live projects first,
// then archived ones (whose history stays readable).
func (c *client) findPacket(ctx context.Context, project, id string) (*apiclient.Packet, error) {
	if project != "" {
		return c.Packet(ctx, project, id)
	}
	for _, archived := range []bool{false, true} {
		limit, cursor := apiclient.Limit(1000), ""
		for {
			var page apiclient.ProjectList
			res, err := c.Raw().ListProjects(ctx, &apiclient.ListProjectsParams{Limit: &limit, Cursor: &cursor, Archived: &archived})
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
				break
			}
			cursor = *page.NextCursor
		}
	}
	return nil, fmt.Errorf("packet %s not found in any project you may see", id)
}

func newWhy() *cobra.Command {
	var f clientFlags
	var layer string
	cmd := &cobra.Command{
		Use:   "why PACKET_ID ITEM_KEY|HANDOFF_ID",
		Short: "Explain why a packet did or did not contain an item (or a handoff, hnd_...)",
		Example: `  contextd why ctxpkt_01J... refund.rules --project acme
  contextd why ctxpkt_01J... hnd_01J... --project acme --json
  contextd why ctxpkt_01J... tone --layer shared   # the _shared item of that key`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, p, err := f.packet(ctx, args[0])
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
			var w apiclient.WhyAnswer
			res, err := c.Raw().WhyPacket(ctx, p.Project, p.PacketId, &q)
			raw, _, err := c.answer(res, err, &w)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) { printWhy(out, p, args[1], &w) })
		},
	}
	f.register(cmd)
	f.registerJSON(cmd)
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
	if r := w.Redaction; r != nil {
		fmt.Fprintf(out, "  redacted since: %s (redaction %s, %s)\n", deref(r.Reason), r.Id, r.Status)
	}
	if w.Item != nil && !w.Item.Deleted {
		fmt.Fprintf(out, "  as it was then (%s, %s, written %s by %s):\n", w.Item.Kind, w.Item.Authority, w.Item.CreatedAt.Format(time.RFC3339), w.Item.CreatedBy)
		for _, line := range strings.Split(w.Item.Content, "\n") {
			fmt.Fprintf(out, "    %s\n", line)
		}
	}
}
