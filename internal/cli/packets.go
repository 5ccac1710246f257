package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
)

// newPacket is `contextd packets`: assemble a packet, and read one back
// (show, records, attribute, replay).
func newPacket() *cobra.Command {
	cmd := &cobra.Command{Use: "packets", Aliases: []string{"packet"}, Short: "Assemble and inspect packets"}
	cmd.AddCommand(assembleCommand(), packetShow(), packetRecords(), packetAttribute("packets attribute"), packetReplay())
	return cmd
}

func packetShow() *cobra.Command {
	var f clientFlags
	show := &cobra.Command{
		Use:   "show PACKET_ID",
		Short: "Print a packet: its budget, sections, exclusions and rendered text",
		Example: `  contextd packets show ctxpkt_01J... --project acme
  contextd packets show ctxpkt_01J...          # searches every project you may see`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			p, err := c.findPacket(cmd.Context(), f.project, args[0])
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), p)
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
	f.registerJSON(show)
	return show
}

// packetRecords is `packets records`: every decision of a packet.
func packetRecords() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{Use: "records PACKET_ID", Short: "Print a packet's records: every decision, in order", Args: cobra.ExactArgs(1),
		Example: `  contextd packets records ctxpkt_01J... --project acme
  contextd packets records ctxpkt_01J... --project acme --json | jq '.data[] | select(.decision == "excluded")'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := projectClient(&f)
			if err != nil {
				return err
			}
			var recs apiclient.RecordList
			res, err := c.Raw().ListPacketRecords(cmd.Context(), f.project, args[0], &apiclient.ListPacketRecordsParams{})
			raw, _, err := c.answer(res, err, &recs)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) { printRecords(out, recs.Data) })
		}}
	f.registerWith(cmd, projectRequired)
	f.registerJSON(cmd)
	return cmd
}

func printRecords(out io.Writer, recs []apiclient.Record) {
	tw := table(out)
	fmt.Fprintln(tw, "DECISION\tSUBJECT\tSECTION OR REASON\tRULE\tTOKENS\tRANK")
	for _, r := range recs {
		where := deref(r.Section)
		if r.Decision != "included" {
			where = deref(r.Reason)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Decision, recordName(r), where, deref(r.Rule), optInt(r.Tokens), optInt(r.Rank))
	}
	tw.Flush()
}

// recordName is "subject:key vN", with "(shared)" for a _shared item.
func recordName(r apiclient.Record) string {
	name := r.Subject + ":" + r.Key
	if r.Version != nil {
		name += fmt.Sprintf(" v%d", *r.Version)
	}
	if deref(r.Layer) == "shared" {
		name += " (shared)"
	}
	return name
}

func optInt(p *int) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

// packetAttribute is `packets attribute`, and at the top level
// `attribute`: which records a sentence of the prompt came from.
func packetAttribute(use string) *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{Use: "attribute PACKET_ID TEXT...", Short: "Which records a text of the prompt came from (as people quote it)", Args: cobra.MinimumNArgs(2),
		Example: fmt.Sprintf(`  contextd %[1]s ctxpkt_01J... "Refunds over 500 EUR need a manager" --project acme
  contextd %[1]s ctxpkt_01J... refunds need a manager --json      # searches every project you may see`, use),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			p, err := c.findPacket(cmd.Context(), f.project, args[0])
			if err != nil {
				return err
			}
			text := strings.Join(args[1:], " ")
			var at apiclient.AttributeResult
			res, err := c.Raw().AttributePacket(cmd.Context(), p.Project, p.PacketId, apiclient.AttributeRequest{Text: &text})
			raw, _, err := c.answer(res, err, &at)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) { printAttribution(out, text, at.Matches) })
		}}
	f.register(cmd)
	f.registerJSON(cmd)
	return cmd
}

// attributed is a record of an attribution: a Record, or one withheld
// (its item hidden from the caller's role since).
type attributed struct {
	apiclient.Record
	Withheld bool `json:"withheld"`
}

func printAttribution(out io.Writer, text string, matches []apiclient.AttributeMatch) {
	if len(matches) == 0 {
		fmt.Fprintf(out, "%q is not in the packet\n", text)
		return
	}
	for i, m := range matches {
		fmt.Fprintf(out, "match %d: %s, bytes [%d, %d), similarity %.2f\n", i+1, m.Match, m.Start, m.End, m.Similarity)
		if m.Text != text {
			fmt.Fprintf(out, "  text:   %q\n", m.Text)
		}
		for _, raw := range m.Records {
			var r attributed
			if err := json.Unmarshal(raw, &r); err != nil {
				continue
			}
			if r.Withheld {
				fmt.Fprintln(out, "  from:   a record you may no longer see (withheld)")
				continue
			}
			fmt.Fprintf(out, "  from:   %s in %s (%s)\n", recordName(r.Record), deref(r.Section), deref(r.Rule))
		}
		for _, s := range m.Scaffolding {
			fmt.Fprintf(out, "  and the packet's own text at [%d, %d)\n", s.Start, s.End)
		}
	}
}

// packetReplay is `packets replay`: the packet assembled again as of its
// snapshot, compared with what was answered.
func packetReplay() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{Use: "replay PACKET_ID", Short: "Assemble a packet again as of its snapshot and compare", Args: cobra.ExactArgs(1),
		Example: `  contextd packets replay ctxpkt_01J... --project acme`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := projectClient(&f)
			if err != nil {
				return err
			}
			var rp apiclient.ReplayResult
			res, err := c.Raw().ReplayPacket(cmd.Context(), f.project, args[0])
			raw, _, err := c.answer(res, err, &rp)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) {
				if rp.Identical {
					fmt.Fprintf(out, "identical: the same bytes again (sha256 %s)\n", rp.RenderedSha256Now)
					return
				}
				fmt.Fprintf(out, "different: sha256 then %s, now %s\n", rp.RenderedSha256Then, rp.RenderedSha256Now)
				if rp.Redacted != nil && *rp.Redacted {
					fmt.Fprintln(out, "  a version the packet included was redacted since")
				}
				for _, d := range rp.Differences {
					fmt.Fprintf(out, "  %s: then %q, now %q\n", d.Subject, d.Then, d.Now)
				}
			})
		}}
	f.registerWith(cmd, projectRequired)
	f.registerJSON(cmd)
	return cmd
}

// projectRequired is the help of --project where a command needs one.
const projectRequired = "project (env CONTEXTD_PROJECT, client config's project), required"

// projectClient is the client of a command that needs a project.
func projectClient(f *clientFlags) (*client, error) {
	if err := f.needProject(); err != nil {
		return nil, err
	}
	return f.client()
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
