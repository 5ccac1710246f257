package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
)

// newSuspects is `contextd suspects`: a failed packet's included entries,
// most suspect first, each with its evidence in a word.
func newSuspects() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "suspects PACKET_ID",
		Short: "Rank a failed packet's entries by the evidence that they caused the failure",
		Example: `  contextd suspects ctxpkt_01J... --project acme
  contextd suspects ctxpkt_01J... --json | jq '.suspects[] | select(.confidence == "causal")'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, p, err := f.packet(ctx, args[0])
			if err != nil {
				return err
			}
			var s apiclient.Suspects
			res, err := c.Raw().GetSuspects(ctx, p.Project, p.PacketId)
			raw, _, err := c.answer(res, err, &s)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) { printSuspects(out, s) })
		},
	}
	f.register(cmd)
	f.registerJSON(cmd)
	return cmd
}

func printSuspects(out io.Writer, s apiclient.Suspects) {
	if len(s.Suspects) == 0 {
		fmt.Fprintf(out, "packet %s has no failed or partial outcome: no suspects\n", s.PacketId)
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCORE\tCONFIDENCE\tENTRY\tEVIDENCE")
	for _, su := range s.Suspects {
		name := su.Subject + " " + su.Key
		if su.Version != nil {
			name += fmt.Sprintf(" v%d", *su.Version)
		}
		var ev []string
		for _, e := range su.Evidence {
			ev = append(ev, evidenceWord(e))
		}
		fmt.Fprintf(tw, "%.3f\t%s\t%s\t%s\n", su.Score, su.Confidence, name, strings.Join(ev, "; "))
	}
	_ = tw.Flush()
}

// evidenceWord is one piece of evidence in a few words.
func evidenceWord(e apiclient.SuspectEvidence) string {
	switch e.Kind {
	case "used":
		return fmt.Sprintf("used %.2f", zero(e.Similarity))
	case "contrast":
		fw, sw, fo, so := zero(e.FailuresWith), zero(e.SuccessesWith), zero(e.FailuresWithout), zero(e.SuccessesWithout)
		return fmt.Sprintf("failed %d/%d with, %d/%d without", fw, fw+sw, fo, fo+so)
	case "changed":
		return "changed since " + deref(e.SincePacket)
	case "ablation":
		return "ablation " + deref(e.PacketId) + " succeeded without it"
	}
	return e.Kind
}

// zero is *p, or the zero value for nil.
func zero[T any](p *T) T {
	var z T
	if p == nil {
		return z
	}
	return *p
}
