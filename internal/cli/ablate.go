package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
)

// newAblate is `contextd ablate`: a counterfactual packet, printed like
// `packets assemble` prints one.
func newAblate() *cobra.Command {
	var f clientFlags
	var without []string
	cmd := &cobra.Command{
		Use:   "ablate PACKET_ID --without ENTRY ...",
		Short: "Assemble a packet again without some of its entries and print the rendered prompt (its id on standard error)",
		Long: `ablate asks for a counterfactual packet: the packet's request assembled again
on the packet's snapshot, at its time, without the entries named, stored as
a packet of its own (its ablation_of is PACKET_ID). The left-out entries'
records say excluded, reason ablated; nothing else changes but what the
budget they free lets in. The rendered prompt goes to standard output: run
the model on it and record its outcome (contextd outcome).

Each --without names one entry the packet included:
  KEY                 an item (whichever layer the packet took it from)
  shared:KEY          the _shared item of that key (project:KEY: the project's)
  request:PART        a part of the request: task, objective, criteria, plan,
                      agent_context, context_packets[N]
  handoff:ID          a predecessor (an id starting hnd_ may be given alone)
An item key that itself starts with one of these prefixes (or hnd_) is
given with its layer: project:request:x.`,
		Example: `  contextd ablate ctxpkt_01J... --without refund.rules --project acme
  contextd ablate ctxpkt_01J... --without tone --without request:context_packets[1]
  contextd ablate ctxpkt_01J... --without shared:tone --without hnd_01J... --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(without) == 0 {
				return fmt.Errorf("give at least one --without: the entries to leave out")
			}
			entries := make([]apiclient.AblationEntry, len(without))
			for i, w := range without {
				entries[i] = ablationEntry(w)
			}
			ctx := cmd.Context()
			c, orig, err := f.packet(ctx, args[0])
			if err != nil {
				return err
			}
			body, err := jsonBody(apiclient.AblationRequest{Without: entries})
			if err != nil {
				return err
			}
			var p apiclient.Packet
			res, err := c.Raw().AblatePacketWithBody(ctx, orig.Project, orig.PacketId, &apiclient.AblatePacketParams{}, contentJSON, body)
			raw, _, err := c.answer(res, err, &p)
			if err != nil {
				return err
			}
			if f.json {
				err = printRaw(cmd.OutOrStdout(), raw)
			} else {
				_, err = fmt.Fprint(cmd.OutOrStdout(), p.Rendered)
			}
			printAssembled(cmd, &p)
			fmt.Fprintf(cmd.ErrOrStderr(), "  a counterfactual of %s without %s\n", orig.PacketId, strings.Join(without, ", "))
			return err
		},
	}
	f.register(cmd)
	f.registerJSON(cmd)
	cmd.Flags().StringArrayVar(&without, "without", nil, "an entry to leave out: KEY, shared:KEY, project:KEY, request:PART or handoff:ID (repeatable)")
	return cmd
}

// ablationEntry reads one --without.
func ablationEntry(s string) apiclient.AblationEntry {
	prefix, rest, ok := strings.Cut(s, ":")
	switch {
	case ok && prefix == "request":
		return apiclient.AblationEntry{Request: &rest}
	case ok && prefix == "handoff":
		return apiclient.AblationEntry{Handoff: &rest}
	case ok && (prefix == "shared" || prefix == "project"):
		return apiclient.AblationEntry{Key: &rest, Layer: &prefix}
	case strings.HasPrefix(s, "hnd_"):
		return apiclient.AblationEntry{Handoff: &s}
	}
	return apiclient.AblationEntry{Key: &s}
}
