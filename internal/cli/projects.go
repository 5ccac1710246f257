package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
)

// newProjects is `contextd projects`: list, create, show, archive and
// restore projects.
func newProjects() *cobra.Command {
	cmd := &cobra.Command{Use: "projects", Short: "List, create, show, archive and restore projects"}
	cmd.AddCommand(projectList(), projectCreate(), projectShow(), projectArchive(), projectRestore())
	return cmd
}

func projectList() *cobra.Command {
	var f clientFlags
	var archived bool
	cmd := &cobra.Command{Use: "list", Short: "List the projects you may see (--archived: the archived ones instead)", Args: cobra.NoArgs,
		Example: `  contextd projects list
  contextd projects list --archived   # the projects to restore
  contextd projects list --json | jq -r '.data[].project'`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			var all []apiclient.Project
			limit, cursor := apiclient.Limit(1000), ""
			for {
				var page apiclient.ProjectList
				res, err := c.Raw().ListProjects(cmd.Context(), &apiclient.ListProjectsParams{Limit: &limit, Cursor: &cursor, Archived: &archived})
				if _, _, err := c.answer(res, err, &page); err != nil {
					return err
				}
				all = append(all, page.Data...)
				if page.NextCursor == nil {
					break
				}
				cursor = *page.NextCursor
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), apiclient.ProjectList{Data: all})
			}
			tw := table(cmd.OutOrStdout())
			fmt.Fprintln(tw, "PROJECT\tCREATED\tDESCRIPTION")
			for _, p := range all {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Project, p.CreatedAt.Format(time.RFC3339), firstLine(p.Description, 70))
			}
			return tw.Flush()
		}}
	cmd.Flags().BoolVar(&archived, "archived", false, "list the archived projects only")
	f.registerServer(cmd)
	f.registerJSON(cmd)
	return cmd
}

// getProject is a project, archived or not; nil when there is none.
func getProject(ctx context.Context, c *client, name string) (*apiclient.Project, json.RawMessage, error) {
	var p apiclient.Project
	res, err := c.Raw().GetProject(ctx, name)
	raw, _, err := c.answer(res, err, &p)
	if isStatus(err, http.StatusNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return &p, raw, nil
}

func projectCreate() *cobra.Command {
	var f clientFlags
	var description string
	cmd := &cobra.Command{Use: "create NAME", Short: "Create a project (admin); one that exists is left as it is unless --description is given", Args: cobra.ExactArgs(1),
		Example: `  contextd projects create acme --description "Support desk of ACME"
  contextd projects create acme      # exists already: said, and left alone`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			had, raw, err := getProject(ctx, c, args[0])
			if err != nil {
				return err
			}
			if had != nil && had.ArchivedAt != nil {
				return fmt.Errorf("project %s is archived: contextd projects restore %s brings it back", had.Project, had.Project)
			}
			if had != nil && !cmd.Flags().Changed("description") {
				// PUT without a description would clear the one it has.
				return f.show(cmd, raw, func(out io.Writer) { fmt.Fprintf(out, "project %s exists; left as it is\n", had.Project) })
			}
			body := apiclient.ProjectWrite{}
			if cmd.Flags().Changed("description") {
				body.Description = &description
			}
			var p apiclient.Project
			res, err := c.Raw().PutProject(ctx, args[0], &apiclient.PutProjectParams{}, body)
			raw, status, err := c.answer(res, err, &p)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) {
				what := "created"
				if status == http.StatusOK {
					what = "updated"
				}
				fmt.Fprintf(out, "project %s %s\n", p.Project, what)
			})
		}}
	f.registerServer(cmd)
	f.registerJSON(cmd)
	cmd.Flags().StringVar(&description, "description", "", "what the project is")
	return cmd
}

func projectShow() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{Use: "show NAME", Short: "Print a project, archived or not", Args: cobra.ExactArgs(1),
		Example: `  contextd projects show acme`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			var p apiclient.Project
			res, err := c.Raw().GetProject(cmd.Context(), args[0])
			raw, _, err := c.answer(res, err, &p)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) { printProject(out, &p) })
		}}
	f.registerServer(cmd)
	f.registerJSON(cmd)
	return cmd
}

func printProject(out io.Writer, p *apiclient.Project) {
	fmt.Fprintf(out, "project      %s\n", p.Project)
	if p.Description != "" {
		fmt.Fprintf(out, "description  %s\n", p.Description)
	}
	fmt.Fprintf(out, "created      %s\n", p.CreatedAt.Format(time.RFC3339))
	fmt.Fprintf(out, "updated      %s\n", p.UpdatedAt.Format(time.RFC3339))
	if p.ArchivedAt != nil {
		fmt.Fprintf(out, "archived     %s by %s (writes and packets answer 410 gone; contextd projects restore %s)\n",
			p.ArchivedAt.Format(time.RFC3339), deref(p.ArchivedBy), p.Project)
	}
}

func projectArchive() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{Use: "archive NAME", Short: "Archive a project (admin): hidden from lists, refuses writes and packets; its history stays", Args: cobra.ExactArgs(1),
		Long: `archive retires a project: it leaves the project list, and every write and
packet assembly in it answers 410 gone. Nothing is deleted: its items,
packets, handoffs and audit chain stay, its history stays readable, and its
chain records who archived it. restore brings it back.`,
		Example: `  contextd projects archive acme-old
  contextd projects restore acme-old`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			var p apiclient.Project
			res, err := c.Raw().ArchiveProject(cmd.Context(), args[0])
			raw, _, err := c.answer(res, err, &p)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) {
				fmt.Fprintf(out, "project %s archived; contextd projects restore %s brings it back\n", p.Project, p.Project)
			})
		}}
	f.registerServer(cmd)
	f.registerJSON(cmd)
	return cmd
}

func projectRestore() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{Use: "restore NAME", Short: "Bring an archived project back (admin)", Args: cobra.ExactArgs(1),
		Example: `  contextd projects restore acme-old`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			var p apiclient.Project
			res, err := c.Raw().RestoreProject(cmd.Context(), args[0], &apiclient.RestoreProjectParams{})
			raw, _, err := c.answer(res, err, &p)
			if err != nil {
				return err
			}
			return f.show(cmd, raw, func(out io.Writer) { fmt.Fprintf(out, "project %s restored\n", p.Project) })
		}}
	f.registerServer(cmd)
	f.registerJSON(cmd)
	return cmd
}
