package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
)

// newProposals is contextd proposals: a project's proposals, and their
// promotion or rejection (docs/proposals.md).
func newProposals() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "proposals",
		Short: "List, promote and reject proposals: item writes stored until another principal promotes them",
	}
	cmd.AddCommand(proposalsList(), proposalDecide("promote"), proposalDecide("reject"))
	return cmd
}

func proposalsList() *cobra.Command {
	var f clientFlags
	var status, key string
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "A project's proposals (or one item's), oldest first",
		Example: "  contextd proposals list --project acme --status pending\n  contextd proposals list --project acme --item deploy.window",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := projectClient(&f)
			if err != nil {
				return err
			}
			var page apiclient.ProposalList
			var raw json.RawMessage
			if key != "" {
				res, err := c.Raw().ListItemProposals(cmd.Context(), f.project, key, &apiclient.ListItemProposalsParams{Status: nonEmpty(status)})
				raw, _, err = c.answer(res, err, &page)
				if err != nil {
					return err
				}
			} else {
				res, err := c.Raw().ListProposals(cmd.Context(), f.project, &apiclient.ListProposalsParams{Status: nonEmpty(status)})
				if raw, _, err = c.answer(res, err, &page); err != nil {
					return err
				}
			}
			return f.show(cmd, raw, func(out io.Writer) {
				for _, p := range page.Data {
					fmt.Fprintf(out, "%s #%d %s: %s %s from %s, by %s (%s)\n", p.Key, p.Proposal, p.Status, p.Authority, p.Kind,
						p.Source, p.ProposedByName, p.Cause)
					fmt.Fprintf(out, "  %s\n", firstLine(p.Content, 100))
				}
				if len(page.Data) == 0 {
					fmt.Fprintln(out, "no proposals")
				}
			})
		},
	}
	f.registerWith(cmd, projectRequired)
	f.registerJSON(cmd)
	cmd.Flags().StringVar(&status, "status", "", "pending, promoted or rejected (default: every status)")
	cmd.Flags().StringVar(&key, "item", "", "one item's proposals")
	return cmd
}

func proposalDecide(decision string) *cobra.Command {
	var f clientFlags
	var reason string
	var rebase bool
	cmd := &cobra.Command{
		Use:   decision + " KEY NUMBER",
		Short: map[string]string{"promote": "Make a pending proposal the item's next version (not its author; a grant that covers it)", "reject": "Reject a pending proposal, with a reason"}[decision],
		Example: map[string]string{"promote": "  contextd proposals promote deploy.window 1 --project acme\n  contextd proposals promote deploy.window 1 --project acme --rebase",
			"reject": `  contextd proposals reject deploy.window 2 --project acme --reason "not what we agreed"`}[decision],
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := projectClient(&f)
			if err != nil {
				return err
			}
			n, err := strconv.Atoi(args[1])
			if err != nil {
				return fmt.Errorf("NUMBER: a proposal's number, not %q", args[1])
			}
			if decision == "reject" {
				var p apiclient.Proposal
				res, err := c.Raw().RejectProposal(cmd.Context(), f.project, args[0], int32(n), &apiclient.RejectProposalParams{}, apiclient.ProposalReject{Reason: reason})
				raw, _, err := c.answer(res, err, &p)
				if err != nil {
					return err
				}
				return f.show(cmd, raw, func(out io.Writer) {
					fmt.Fprintf(out, "proposal %s/%s #%d rejected: %s\n", p.Project, p.Key, p.Proposal, reason)
				})
			}
			var pr apiclient.Promotion
			body := apiclient.ProposalPromote{Rebase: &rebase, Reason: nonEmpty(reason)}
			res, err := c.Raw().PromoteProposal(cmd.Context(), f.project, args[0], int32(n), &apiclient.PromoteProposalParams{}, body)
			raw, _, err := c.answer(res, err, &pr)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) {
				fmt.Fprintf(out, "proposal %s/%s #%d promoted: item %s/%s v%d, authority %s\n", pr.Proposal.Project, pr.Proposal.Key,
					pr.Proposal.Proposal, pr.Item.Project, pr.Item.Key, pr.Item.Version, pr.Item.Authority)
			})
		},
	}
	f.registerWith(cmd, projectRequired)
	f.registerJSON(cmd)
	help := map[string]string{"promote": "a note kept with the promotion", "reject": "why (required)"}[decision]
	cmd.Flags().StringVar(&reason, "reason", "", help)
	if decision == "promote" {
		cmd.Flags().BoolVar(&rebase, "rebase", false, "promote a proposal made against a version that is no longer current")
	}
	return cmd
}

// printProposed says what a write that became a proposal is.
func printProposed(out io.Writer, raw json.RawMessage) {
	var p apiclient.Proposal
	_ = json.Unmarshal(raw, &p)
	fmt.Fprintf(out, "item %s/%s proposed: proposal #%d (%s, authority %s), pending until another principal promotes it\n",
		p.Project, p.Key, p.Proposal, p.Cause, p.Authority)
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
