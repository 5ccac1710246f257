package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
)

func newOutcome() *cobra.Command {
	var f clientFlags
	var status, answerFile, label, note, source string
	var score float64
	cmd := &cobra.Command{
		Use:   "outcome PACKET_ID --status success|failure|partial",
		Short: "Record how a packet's answer went (with the model's answer, which contextd attributes to the packet)",
		Example: `  contextd outcome ctxpkt_01J... --project acme --status failure --label wrong_refund_amount --answer-file answer.txt
  model < prompt.md | contextd outcome ctxpkt_01J... --status partial --answer-file - --score 0.5 --source evaluator`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			body := apiclient.OutcomeCreate{Status: status}
			for _, o := range []struct {
				v   string
				dst **string
			}{{label, &body.Label}, {note, &body.Note}, {source, &body.Source}} {
				if o.v != "" {
					v := o.v
					*o.dst = &v
				}
			}
			if cmd.Flags().Changed("score") {
				body.Score = &score
			}
			if answerFile != "" {
				var b []byte
				if answerFile == "-" {
					b, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), 1<<20))
				} else {
					b, err = os.ReadFile(answerFile)
				}
				if err != nil {
					return fmt.Errorf("read the answer: %w", err)
				}
				a := string(b)
				body.Answer = &a
			}
			ctx := cmd.Context()
			p, err := c.findPacket(ctx, f.project, args[0])
			if err != nil {
				return err
			}
			var o apiclient.Outcome
			res, err := c.Raw().RecordOutcome(ctx, p.Project, p.PacketId, &apiclient.RecordOutcomeParams{}, body)
			raw, _, err := c.answer(res, err, &o)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) {
				fmt.Fprintf(out, "outcome %s of packet %s: %s (%s)\n", o.Id, o.PacketId, o.Status, o.Source)
				printUsed(out, o.Used)
			})
		},
	}
	f.register(cmd)
	f.registerJSON(cmd)
	cmd.Flags().StringVar(&status, "status", "", "success, failure or partial (required)")
	cmd.Flags().StringVar(&answerFile, "answer-file", "", "a file holding the model's answer, - for standard input")
	cmd.Flags().Float64Var(&score, "score", 0, "a score from 0 to 1")
	cmd.Flags().StringVar(&label, "label", "", "a short name for the outcome (wrong_refund_amount)")
	cmd.Flags().StringVar(&note, "note", "", "a note")
	cmd.Flags().StringVar(&source, "source", "", "human, evaluator, agent (the default) or test")
	_ = cmd.MarkFlagRequired("status")
	return cmd
}

func printUsed(out io.Writer, used []apiclient.OutcomeUse) {
	if len(used) == 0 {
		return
	}
	fmt.Fprintln(out, "the answer used:")
	for _, u := range used {
		name := u.Subject + " " + u.Key
		if u.Version != nil {
			name += fmt.Sprintf(" v%d", *u.Version)
		}
		fmt.Fprintf(out, "  %s (%s, similarity %.2f)\n", name, u.Match, u.Similarity)
	}
}

func newOutcomes() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:     "outcomes PACKET_ID",
		Short:   "List a packet's outcomes, oldest first",
		Example: `  contextd outcomes ctxpkt_01J... --project acme`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, p, err := f.packet(ctx, args[0])
			if err != nil {
				return err
			}
			var l apiclient.OutcomeList
			res, err := c.Raw().ListOutcomes(ctx, p.Project, p.PacketId, &apiclient.ListOutcomesParams{})
			raw, _, err := c.answer(res, err, &l)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) {
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "SEQ\tSTATUS\tSOURCE\tSCORE\tLABEL\tUSED\tCREATED")
				for _, o := range l.Data {
					score := "-"
					if o.Score != nil {
						score = fmt.Sprintf("%.2f", *o.Score)
					}
					var used []string
					for _, u := range o.Used {
						used = append(used, u.Key)
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", o.Seq, o.Status, o.Source, score, orDash(deref(o.Label)),
						orDash(strings.Join(used, ",")), o.CreatedAt.Format("2006-01-02 15:04:05"))
				}
				_ = tw.Flush()
			})
		},
	}
	f.register(cmd)
	f.registerJSON(cmd)
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
