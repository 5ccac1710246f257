package cli

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
	"github.com/contextd/contextd/internal/demo"
)

// newDemo is `contextd demo`: internal/demo's support desk, loaded into a
// new project of a running server through its API.
func newDemo() *cobra.Command {
	var f clientFlags
	var project string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Load a small, realistic project (a support desk) into a running server, for the explorer and why",
		Long: `Load a small, realistic project into a running server: the support desk of
Larkspur, a made-up app. Three agents (support, billing, a team lead), ~40
items of every kind and trigger (always-on, keywords, tools, relevance, pins,
templates, role-hidden, an expired one, two contradictions), one task told as
four packets and four handoffs (rejected, reworked and accepted, withdrawn,
pending), and the redaction of a card number pasted into a ticket note.

It needs an admin's key (it makes the project and the agents) and refuses a
project that already exists, writing nothing.`,
		Example: `  make run                          # in another terminal
  contextd demo                     # loads demo-support into http://127.0.0.1:8080
  contextd demo --project demo-2 --url http://contextd.internal:8080 --key "$ADMIN_KEY"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return fmt.Errorf("%w\n  (a server that `make run` started keeps its admin's key in .contextd/admin.key, where the demo finds it)", err)
			}
			res, err := demo.Load(cmd.Context(), demo.Config{
				Admin:    c.Client,
				Options:  []apiclient.ClientOption{apiclient.WithHTTPClient(&http.Client{Timeout: 30 * time.Second})},
				Project:  project,
				Progress: cmd.ErrOrStderr(),
			})
			if errors.Is(err, demo.ErrUnreachable) {
				// %v, not %w: this hint is the one to print.
				return fmt.Errorf("%v\n  start one with `make run` (in another terminal), or name yours with --url or CONTEXTD_URL", err)
			}
			if err != nil {
				return err
			}
			printDemo(cmd.OutOrStdout(), res, c.BaseURL(), demoFlags(cmd, f.url))
			return nil
		},
	}
	f.registerServer(cmd)
	cmd.Flags().StringVar(&project, "project", demo.DefaultProject, "the project to make (it must not exist)")
	return cmd
}

// demoFlags are the flags the suggested commands need to reach the same
// server as the demo did: --url when it was given as a flag, and a word
// about --key when the key was.
func demoFlags(cmd *cobra.Command, url string) string {
	var s string
	if cmd.Flags().Changed("url") {
		s += " --url " + url
	}
	if cmd.Flags().Changed("key") {
		s += ` --key "$KEY"`
	}
	return s
}

// printDemo prints what the demo made and three things to try with its
// real ids.
func printDemo(out io.Writer, r *demo.Result, url, flags string) {
	fmt.Fprintf(out, "Loaded the demo into project %s at %s.\n\n", r.Project, url)
	fmt.Fprintf(out, "Items: %d keys, %d versions; %d visible to some roles only.\n", r.Items, r.Versions, r.Hidden)
	fmt.Fprintf(out, "  kinds:    %s\n", counts(r.Kinds))
	fmt.Fprintf(out, "  triggers: %s\n", counts(r.Triggers))
	fmt.Fprintln(out, "\nAgents (keys are shown once; sign in to the explorer with one to see what its role sees):")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, a := range r.Agents {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", a.Name, a.Role, a.Permission, a.ID, a.Key)
	}
	tw.Flush()
	fmt.Fprintf(out, "\nTask %s, packets:\n", r.Task)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, p := range r.Packets {
		fmt.Fprintf(tw, "  %s\t%s\t%s\tstep %s\n", p.Name, p.ID, p.Role, p.Step)
	}
	tw.Flush()
	fmt.Fprintln(out, "Handoffs:")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, h := range r.Handoffs {
		rework := ""
		if h.ReworkOf != "" {
			rework = "  rework of " + h.ReworkOf
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s → %s\t%s\t%s%s\n", h.Name, h.ID, h.SourceRole, h.TargetRole, h.Intent, h.Status, rework)
	}
	tw.Flush()
	for _, red := range r.Redactions {
		fmt.Fprintf(out, "Redaction %s of %s v%d: %s\n", red.ID, red.Key, red.Version, red.Status)
	}
	fmt.Fprintln(out, "\nThree things to try:")
	fmt.Fprintf(out, "  1. Open %s/ui/projects/%s/packets/%s\n     (sign in at %s/ui/login with an admin key, make run's is in .contextd/admin.key, or with an agent's above)\n",
		url, r.Project, r.Try.Packet, url)
	fmt.Fprintf(out, "  2. contextd why %s %s --project %s%s\n", r.Try.Packet, r.Try.Included, r.Project, flags)
	fmt.Fprintf(out, "     contextd why %s %s --project %s%s\n", r.Try.Packet, r.Try.Excluded, r.Project, flags)
	fmt.Fprintf(out, "  3. contextd handoffs history %s --project %s%s\n", r.Task, r.Project, flags)
}

// counts is "a 2, b 1", by name.
func counts(m map[string]int) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, m[n])
	}
	return strings.Join(parts, ", ")
}
