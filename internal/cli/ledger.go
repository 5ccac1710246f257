package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
)

// newLedger is `contextd ledger`: a project's items by what they cost and
// earned, or with a key that item's figures per version.
func newLedger() *cobra.Command {
	var f clientFlags
	var sortBy, packetsOf, cursor string
	var limit int64
	cmd := &cobra.Command{
		Use:   "ledger [KEY]",
		Short: "What items cost and earned: offered, included, tokens, outcomes, used",
		Long: `Without a key, the project's items in an order of the ledger: failure_rate
(the highest share of failed outcomes first), tokens (the most spent first) or
unused (the items answers used least first). With a key, that item's figures
over every version and per version.`,
		Example: `  contextd ledger --project acme --sort tokens --limit 20
  contextd ledger refund.policy --project acme
  contextd ledger tone --project _shared --packets-project acme --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := f.needProject(); err != nil {
				return err
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			var lim *int64
			if limit > 0 {
				lim = &limit
			}
			if len(args) == 1 {
				var l apiclient.ItemLedger
				res, err := c.Raw().GetItemLedger(ctx, f.project, args[0], &apiclient.GetItemLedgerParams{Project: ptrIf(packetsOf), Limit: lim, Cursor: ptrIf(cursor)})
				raw, _, err := c.answer(res, err, &l)
				if err != nil {
					return err
				}
				return f.show(cmd, raw, func(out io.Writer) { printItemLedger(out, l) })
			}
			var l apiclient.ProjectLedger
			res, err := c.Raw().GetProjectLedger(ctx, f.project, &apiclient.GetProjectLedgerParams{Sort: ptrIf(sortBy), Limit: lim, Cursor: ptrIf(cursor)})
			raw, _, err := c.answer(res, err, &l)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) { printProjectLedger(out, l) })
		},
	}
	f.register(cmd)
	f.registerJSON(cmd)
	cmd.Flags().StringVar(&sortBy, "sort", "", "failure_rate (default), tokens or unused")
	cmd.Flags().Int64Var(&limit, "limit", 0, "at most this many items or versions (1 to 1000; default 100)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "the next page: the cursor the page before printed")
	cmd.Flags().StringVar(&packetsOf, "packets-project", "", "for a _shared item: the project whose packets to count")
	return cmd
}

func ptrIf(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

const ledgerColumns = "OFFERED\tINCLUDED\tTOKENS\tSUCCESS\tFAILURE\tPARTIAL\tUSED\tFAILURE RATE\tEXCLUDED BY"

// ledgerRow is one line of figures, in ledgerColumns' order.
func ledgerRow(f apiclient.LedgerFigures) string {
	rate := "-"
	if f.FailureRate != nil {
		rate = fmt.Sprintf("%.2f", *f.FailureRate)
	}
	reasons := make([]string, 0, len(f.ExcludedBy))
	for r, n := range f.ExcludedBy {
		reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
	}
	sort.Strings(reasons)
	return fmt.Sprintf("%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s", f.Offered, f.Included, f.Tokens, f.Outcomes.Success,
		f.Outcomes.Failure, f.Outcomes.Partial, f.Used, rate, strings.Join(reasons, ", "))
}

func printProjectLedger(out io.Writer, l apiclient.ProjectLedger) {
	if len(l.Data) == 0 {
		fmt.Fprintf(out, "no packet of %s has had an item yet\n", l.Project)
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ITEM\t"+ledgerColumns)
	for _, e := range l.Data {
		name := e.Key
		if e.Project != l.Project {
			name = e.Project + "/" + e.Key
		}
		fmt.Fprintln(tw, name+"\t"+ledgerRow(apiclient.LedgerFigures{Offered: e.Offered, Included: e.Included, Tokens: e.Tokens,
			Outcomes: e.Outcomes, Used: e.Used, FailureRate: e.FailureRate, ExcludedBy: e.ExcludedBy}))
	}
	_ = tw.Flush()
	ledgerFooter(out, l.Pending, l.NextCursor)
}

func printItemLedger(out io.Writer, l apiclient.ItemLedger) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\t"+ledgerColumns)
	for _, v := range l.Versions {
		fmt.Fprintf(tw, "v%d\t%s\n", v.Version, ledgerRow(apiclient.LedgerFigures{Offered: v.Offered, Included: v.Included, Tokens: v.Tokens,
			Outcomes: v.Outcomes, Used: v.Used, FailureRate: v.FailureRate, ExcludedBy: v.ExcludedBy}))
	}
	fmt.Fprintln(tw, "all\t"+ledgerRow(l.Totals))
	_ = tw.Flush()
	ledgerFooter(out, l.Pending, l.NextCursor)
}

func ledgerFooter(out io.Writer, pending int64, next *string) {
	if next != nil {
		fmt.Fprintf(out, "more: --cursor %s\n", *next)
	}
	if pending > 0 {
		fmt.Fprintf(out, "(%d packets and outcomes not yet counted: the server folds them within seconds)\n", pending)
	}
}
